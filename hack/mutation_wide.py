"""The mutation targets beyond the numeric core: every module a user's figures or cluster depend on.

Data only, read by ``hack/mutation.py``: per target (name, module, functions, tests) as in its ``TARGETS``; per
hand-made mutant (id, file, old, new, tests, why) as in its ``MANUAL``, for what mutmut cannot reach (the Jinja
templates under manifests/, decorated functions). Each target names the focused tests that own the module, so a
kill comes from them and a target runs in minutes, not hours.
"""

from __future__ import annotations

from typing import Any

from mutants import AREA_MANUAL

# the render package's modules all reach the cluster through render_objects, so one set of tests owns each
RENDER_TESTS = (
    "tests/render/test_render_objects.py",
    "tests/render/test_render_golden.py",
    "tests/render/test_render_properties.py",
    "tests/render/test_workload_configmap.py",
    "tests/kube/test_fake_rules.py",
    "tests/render/test_render_audit.py",
    "tests/render/test_output_meaning.py",
    "tests/render/test_templates_mutants.py",
)

# (name, module, functions (() = all), tests)
WIDE_TARGETS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("render", "spectrn.render.manifests", (), (*RENDER_TESTS, "tests/render/test_manifests_mutants.py")),
    ("render-server", "spectrn.render.server", (), (*RENDER_TESTS, "tests/render/test_server_mutants.py")),
    ("render-load-job", "spectrn.render.load_job", (), (*RENDER_TESTS, "tests/render/test_load_job_mutants.py")),
    ("render-templates", "spectrn.render.templates", (), RENDER_TESTS),
    ("render-literals", "spectrn.render.literals", (), RENDER_TESTS),
    ("render-output", "spectrn.render.output", (), RENDER_TESTS),
    (
        "render-iam",
        "spectrn.render.iam",
        (),
        ("tests/render/test_iam_policies.py", "tests/render/test_rel_security.py"),
    ),
    (
        "deploy-plan",
        "spectrn.deploy.plan",
        (),
        (
            "tests/deploy/test_plan_apply.py",
            "tests/deploy/test_teardown_status.py",
            "tests/deploy/test_plan_apply_audit.py",
            "tests/deploy/test_plan_mutants.py",
        ),
    ),
    (
        "deploy-apply",
        "spectrn.deploy.apply",
        (),
        (
            "tests/deploy/test_plan_apply.py",
            "tests/deploy/test_teardown_status.py",
            "tests/deploy/test_plan_apply_audit.py",
            "tests/deploy/test_apply_mutants.py",
        ),
    ),
    (
        "deploy-wait",
        "spectrn.deploy.wait",
        (),
        (
            "tests/deploy/test_wait_diagnose.py",
            "tests/deploy/test_recreate_rollout.py",
            "tests/deploy/test_teardown_status.py",
            "tests/deploy/test_wait_audit.py",
            "tests/deploy/test_diagnose_audit.py",
            "tests/deploy/test_wait_mutants.py",
        ),
    ),
    (
        "deploy-teardown",
        "spectrn.deploy.teardown",
        (),
        (
            "tests/deploy/test_teardown_status.py",
            "tests/deploy/test_teardown_user_objects.py",
            "tests/deploy/test_teardown_audit.py",
            "tests/deploy/test_teardown_mutants.py",
        ),
    ),
    (
        "kube-client",
        "spectrn.kube.client",
        (),
        (
            "tests/kube/test_realkube.py",
            "tests/kube/test_fake_rules.py",
            "tests/deploy/test_rel_kube_faults.py",
            "tests/kube/test_kube_audit.py",
            "tests/kube/test_client_mutants.py",
        ),
    ),
    (
        "emf",
        "spectrn.publish.emf",
        (),
        (
            "tests/publish/test_dashboard_emf_iam.py",
            "tests/publish/test_emf_dashboard_meaning.py",
            "tests/publish/test_emf_audit.py",
        ),
    ),
    (
        "dashboard",
        "spectrn.publish.dashboard",
        (),
        (
            "tests/publish/test_dashboard_emf_iam.py",
            "tests/publish/test_emf_dashboard_meaning.py",
            "tests/publish/test_moto_integration.py",
            "tests/publish/test_dashboard_audit.py",
            "tests/publish/test_dashboard_mutants.py",
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
            "tests/publish/test_publisher_audit.py",
            "tests/publish/test_publisher_mutants.py",
        ),
    ),
    (
        "report-tables",
        "spectrn.report.tables",
        (),
        (
            "tests/report/test_report.py",
            "tests/report/test_table_values.py",
            "tests/report/test_tables_audit.py",
            "tests/report/test_tables_mutants.py",
        ),
    ),
    (
        "report-markdown",
        "spectrn.report.markdown",
        (),
        (
            "tests/report/test_report.py",
            "tests/report/test_tables_audit.py",
            "tests/report/test_views_audit.py",
            "tests/report/test_markdown_mutants.py",
        ),
    ),
    (
        "report-format",
        "spectrn.report.format",
        (),
        (
            "tests/report/test_report.py",
            "tests/report/test_tables_audit.py",
            "tests/report/test_views_audit.py",
            "tests/report/test_sweep_tables_audit.py",
            "tests/report/test_format_mutants.py",
        ),
    ),
    (
        "report-compare",
        "spectrn.report.compare",
        (),
        (
            "tests/report/test_compare_intervals.py",
            "tests/report/test_report.py",
            "tests/report/test_compare_audit.py",
            "tests/report/test_compare_mutants.py",
        ),
    ),
    (
        "recommend",
        "spectrn.sweep.recommend",
        (),
        (
            "tests/sweep/test_sweep_recommend.py",
            "tests/sweep/test_sweep_recommend_texts.py",
            "tests/sweep/test_sweep_rule_fixtures.py",
            "tests/sweep/test_sweep_objective.py",
            "tests/sweep/test_sweep_recommend_mutants.py",
        ),
    ),
    (
        "objective",
        "spectrn.sweep.objective",
        (),
        (
            "tests/sweep/test_sweep_objective.py",
            "tests/sweep/test_objective_audit.py",
            "tests/sweep/test_objective_mutants.py",
        ),
    ),
    (
        "grid",
        "spectrn.sweep.grid",
        (),
        (
            "tests/sweep/test_sweep_cluster.py",
            "tests/sweep/test_sweep_resume.py",
            "tests/sweep/test_grid_audit.py",
            "tests/sweep/test_grid_mutants.py",
        ),
    ),
    (
        "twin-costs",
        "spectrn.twin.costs",
        (),
        (
            "tests/twin/test_units.py",
            "tests/twin/test_twin_audit.py",
            "tests/twin/test_costs_mutants.py",
            "tests/twin/test_costs_regimes.py",
        ),
    ),
    (
        "twin-acceptance",
        "spectrn.twin.acceptance",
        (),
        (
            "tests/twin/test_units.py",
            "tests/twin/test_twin_audit.py",
            "tests/twin/test_interval_meaning.py",
            "tests/twin/test_acceptance_mutants.py",
        ),
    ),
    (
        "twin-predict",
        "spectrn.twin.predict",
        (),
        ("tests/twin/test_units.py", "tests/twin/test_twin_audit.py", "tests/twin/test_predict_mutants.py"),
    ),
    (
        "collect",
        "spectrn.bench.incluster",
        (),
        (
            "tests/bench/test_incluster.py",
            "tests/cli/test_collect_progress.py",
            "tests/bench/test_incluster_audit.py",
            "tests/bench/test_incluster_mutants.py",
        ),
    ),
    (
        "sim-model",
        "spectrn.sim.model",
        (),
        (
            "tests/sim/test_model.py",
            "tests/sim/test_ground_truth.py",
            "tests/sim/test_model_audit.py",
            "tests/sim/test_model_mutants.py",
        ),
    ),
    (
        "sim-metrics",
        "spectrn.sim.metrics",
        (),
        (
            "tests/sim/test_conformance.py",
            "tests/sim/test_profiles.py",
            "tests/sim/test_engine_audit.py",
            "tests/sim/test_metrics_mutants.py",
        ),
    ),
    (
        "arrivals",
        "spectrn.loadgen.arrivals",
        (),
        (
            "tests/loadgen/test_load_shapes.py",
            "tests/loadgen/test_shard_arrivals.py",
            "tests/loadgen/test_multi_turn.py",
            "tests/loadgen/test_arrivals_audit.py",
            "tests/loadgen/test_arrivals_mutants.py",
            "tests/cli/test_rel_bad_input.py",
        ),
    ),
    (
        "llmperf",
        "spectrn.analyze.llmperf",
        (),
        (
            "tests/analyze/test_llmperf.py",
            "tests/analyze/test_llmperf_fields.py",
            "tests/analyze/test_llmperf_audit.py",
            "tests/analyze/test_llmperf_mutants.py",
        ),
    ),
    (
        "config",
        "spectrn.configuration.config",
        (),
        (
            "tests/configuration/test_context_length.py",
            "tests/configuration/test_neuron_rules.py",
            "tests/configuration/test_config_sources.py",
            "tests/configuration/test_config_audit.py",
            "tests/configuration/test_bench_audit.py",
            "tests/configuration/test_config_mutants.py",
        ),
    ),
    (
        "folder",
        "spectrn.run.folder",
        (),
        (
            "tests/run/test_schema_versions.py",
            "tests/publish/test_datums.py",
            "tests/run/test_folder_audit.py",
            "tests/run/test_folder_mutants.py",
        ),
    ),
)

# (id, file, old, new, tests, why): the templates mutmut never sees, one realistic slip each
WIDE_MANUAL: tuple[tuple[Any, ...], ...] = (
    (
        "template-rolling-update",
        "manifests/server.yaml.j2",
        "    type: Recreate",
        "    type: RollingUpdate",
        ("tests/render/test_render_golden.py::test_golden",),
        "the server Deployment rolls (a second pod can never get the devices the first one holds)",
    ),
    (
        "template-claim-dropped",
        "manifests/server.yaml.j2",
        "      resourceClaims:",
        "      resourceClaimsX:",
        ("tests/kube/test_fake_claims_rule.py",),
        "the pod's resourceClaims key misspelt: the container's claim refers to nothing",
    ),
    (
        "template-compile-claim-dropped",
        "manifests/compile-job.yaml.j2",
        "      resourceClaims:",
        "      resourceClaimsX:",
        ("tests/kube/test_fake_claims_rule.py",),
        "the compile Job's pod loses its resourceClaims",
    ),
    # the twin's cost fit: two bugs fixed, each put back here
    (
        "twin-costs-zeroed-stays-zero",
        "src/spectrn/twin/costs.py",
        "separated = determined(compute, profile)",
        "separated = determined(compute, sorted([*free0, c_index]))",
        ("tests/twin/test_costs_mutants.py",),
        "a term the memory-only fit zeroed stays at 0 in the compute-regime fit that needs it",
    ),
    (
        "twin-costs-discard-note-lost",
        "src/spectrn/twin/costs.py",
        'notes["compute_per_token_s"] = f"{why}: the steps',
        'notes["compute_per_token_s"] = f"no compute-bound step observed: the steps',
        ("tests/twin/test_costs_mutants.py",),
        "a compute regime discarded for its negative slope is reported as no compute-bound step at all",
    ),
    # realistic slips the suite once let through (issue 29's audit), each now killed by a named test
    (
        "teardown-secrets-not-checked",
        "src/spectrn/deploy/teardown.py",
        '        ("v1", "Secret"),\n',
        "",
        ("tests/deploy/test_teardown_user_objects.py",),
        "teardown does not look for Secrets before deleting the namespace (the user's token Secret goes with it)",
    ),
    (
        "emf-timestamp-seconds",
        "src/spectrn/publish/emf.py",
        "ts_ms = int(rec.sent_at * 1000)",
        "ts_ms = int(rec.sent_at)",
        ("tests/publish/test_emf_dashboard_meaning.py",),
        "EMF timestamps in seconds (CloudWatch reads milliseconds: January 1970)",
    ),
    (
        "emf-aggregate-dimensions-dropped",
        "src/spectrn/publish/emf.py",
        "dimsets = [list(DIMS_BY_CLASS), list(DIMS_AGGREGATE)]",
        "dimsets = [list(DIMS_BY_CLASS)]",
        ("tests/publish/test_emf_dashboard_meaning.py",),
        "per-request EMF lines lose the all-classes dimension set",
    ),
    (
        "dashboard-e2e-speedup-inverted",
        "src/spectrn/publish/dashboard.py",
        '(m.name, "p50", s.dashboard, m.better == "higher")',
        '(m.name, "p50", s.dashboard, m.better == "higher" or m.name == "E2ELatency")',
        ("tests/publish/test_emf_dashboard_meaning.py",),
        "the dashboard's e2e speedup divides speculative by baseline (< 1 reads as slower when it is faster)",
    ),
    (
        "context-check-only-when-output-fills-the-context",
        "src/spectrn/configuration/config.py",
        "        if self.bench.input_tokens is not None and (\n",
        "        if self.max_model_len <= self.bench.max_tokens and self.bench.input_tokens is not None and (\n",
        ("tests/configuration/test_context_length.py",),
        "the defect fixed in issue 29: input + output over max_model_len refused only when max_tokens alone fills it",
    ),
) + AREA_MANUAL
