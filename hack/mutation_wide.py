"""The mutation targets beyond the numeric core: every module a user's figures or cluster depend on.

Data only, read by ``hack/mutation.py``: per target (name, module, functions, tests) as in its ``TARGETS``; per
hand-made mutant (id, file, old, new, tests, why) as in its ``MANUAL``, for what mutmut cannot reach (the Jinja
templates under manifests/, decorated functions). Each target names the focused tests that own the module, so a
kill comes from them and a target runs in minutes, not hours.
"""

from __future__ import annotations

# (name, module, functions (() = all), tests)
WIDE_TARGETS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "render",
        "spectrn.render.manifests",
        (),
        (
            "tests/render/test_render_objects.py",
            "tests/render/test_render_golden.py",
            "tests/render/test_render_properties.py",
            "tests/render/test_workload_configmap.py",
            "tests/kube/test_fake_rules.py",
        ),
    ),
    (
        "deploy-plan",
        "spectrn.deploy.plan",
        (),
        ("tests/deploy/test_plan_apply.py", "tests/deploy/test_teardown_status.py"),
    ),
    (
        "deploy-apply",
        "spectrn.deploy.apply",
        (),
        ("tests/deploy/test_plan_apply.py", "tests/deploy/test_teardown_status.py"),
    ),
    (
        "deploy-wait",
        "spectrn.deploy.wait",
        (),
        ("tests/deploy/test_wait_diagnose.py", "tests/deploy/test_teardown_status.py"),
    ),
    ("deploy-teardown", "spectrn.deploy.teardown", (), ("tests/deploy/test_teardown_status.py",)),
    (
        "kube-client",
        "spectrn.kube.client",
        (),
        ("tests/kube/test_realkube.py", "tests/kube/test_fake_rules.py", "tests/deploy/test_rel_kube_faults.py"),
    ),
    (
        "emf",
        "spectrn.publish.emf",
        (),
        ("tests/publish/test_dashboard_emf_iam.py", "tests/publish/test_emf_dashboard_meaning.py"),
    ),
    (
        "dashboard",
        "spectrn.publish.dashboard",
        (),
        (
            "tests/publish/test_dashboard_emf_iam.py",
            "tests/publish/test_emf_dashboard_meaning.py",
            "tests/publish/test_moto_integration.py",
        ),
    ),
    (
        "publisher",
        "spectrn.publish.publisher",
        (),
        (
            "tests/publish/test_moto_integration.py",
            "tests/publish/test_publish_resume.py",
            "tests/publish/test_rel_cloudwatch_faults.py",
        ),
    ),
    ("report-tables", "spectrn.report.tables", (), ("tests/report/test_report.py",)),
    ("report-markdown", "spectrn.report.markdown", (), ("tests/report/test_report.py",)),
    ("report-format", "spectrn.report.format", (), ("tests/report/test_report.py",)),
    (
        "report-compare",
        "spectrn.report.compare",
        (),
        ("tests/report/test_compare_intervals.py", "tests/report/test_report.py"),
    ),
    (
        "recommend",
        "spectrn.sweep.recommend",
        (),
        ("tests/sweep/test_sweep_recommend.py", "tests/sweep/test_sweep_objective.py"),
    ),
    ("objective", "spectrn.sweep.objective", (), ("tests/sweep/test_sweep_objective.py",)),
    ("grid", "spectrn.sweep.grid", (), ("tests/sweep/test_sweep_cluster.py", "tests/sweep/test_sweep_resume.py")),
    ("twin-costs", "spectrn.twin.costs", (), ("tests/twin/test_units.py",)),
    ("twin-acceptance", "spectrn.twin.acceptance", (), ("tests/twin/test_units.py",)),
    ("twin-predict", "spectrn.twin.predict", (), ("tests/twin/test_units.py",)),
    (
        "collect",
        "spectrn.collect.incluster",
        (),
        ("tests/collect/test_incluster.py", "tests/cli/test_collect_progress.py"),
    ),
    ("sim-model", "spectrn.sim.model", (), ("tests/sim/test_model.py", "tests/sim/test_ground_truth.py")),
    ("sim-metrics", "spectrn.sim.metrics", (), ("tests/sim/test_conformance.py", "tests/sim/test_profiles.py")),
    (
        "arrivals",
        "spectrn.loadgen.arrivals",
        (),
        ("tests/loadgen/test_load_shapes.py", "tests/loadgen/test_multi_turn.py"),
    ),
    ("llmperf", "spectrn.analyze.llmperf", (), ("tests/analyze/test_llmperf.py",)),
    ("folder", "spectrn.run.folder", (), ("tests/run/test_schema_versions.py", "tests/publish/test_datums.py")),
)

# (id, file, old, new, tests, why): the templates mutmut never sees, one realistic slip each
WIDE_MANUAL: tuple[tuple[str, str, str, str, tuple[str, ...], str], ...] = (
    (
        "template-rolling-update",
        "manifests/server.yaml.j2",
        "    type: Recreate",
        "    type: RollingUpdate",
        ("tests/render/test_render_golden.py", "tests/render/test_render_objects.py"),
        "the server Deployment rolls (a second pod can never get the devices the first one holds)",
    ),
    (
        "template-claim-dropped",
        "manifests/server.yaml.j2",
        "      resourceClaims:",
        "      resourceClaimsX:",
        ("tests/render/test_render_golden.py", "tests/kube/test_fake_rules.py"),
        "the pod's resourceClaims key misspelt: the container's claim refers to nothing",
    ),
    (
        "template-compile-claim-dropped",
        "manifests/compile-job.yaml.j2",
        "      resourceClaims:",
        "      resourceClaimsX:",
        ("tests/render/test_render_golden.py", "tests/kube/test_fake_rules.py", "tests/sweep/test_sweep_compile.py"),
        "the compile Job's pod loses its resourceClaims",
    ),
)
