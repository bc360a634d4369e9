"""``render``'s YAML and ``render -o``'s files, byte for byte: the comments a reader must act on, each pod's Pod
Security Standards level, block literals, key order, file names and numbering, and the folder checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spectrn.errors import ConfigError
from spectrn.render.output import object_filename, output_folder, to_yaml, write_objects


def deployment(*, non_root: bool, caps: list[str] | None = None, name: str = "spectrn-baseline") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "vllm", "image": "img"}
    if caps is not None:
        container["securityContext"] = {"capabilities": {"add": caps}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"securityContext": {"runAsNonRoot": non_root}, "containers": [container]}}},
    }


SA = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "spectrn-server"}}
SA_IRSA = {**SA, "metadata": {"name": "spectrn-server", "annotations": {"eks.amazonaws.com/role-arn": "arn:x"}}}


def test_a_service_account_without_an_aws_identity_says_how_to_give_it_one() -> None:
    assert to_yaml([SA]) == (
        "---\n"
        "# AWS identity: set service_accounts.*_role_arn to render the IRSA annotation\n"
        "# eks.amazonaws.com/role-arn, or create an EKS Pod Identity association for this ServiceAccount.\n"
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: spectrn-server\n"
    )
    assert to_yaml([SA_IRSA]) == (
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: spectrn-server\n  annotations:\n"
        "    eks.amazonaws.com/role-arn: arn:x\n"
    )


@pytest.mark.parametrize(
    ("non_root", "caps", "level"),
    [
        (True, None, "restricted"),
        (False, None, "baseline (root in the Neuron DLC, /dev/shm, S3 volume)"),
        (True, ["CHOWN", "NET_BIND_SERVICE"], "restricted"),  # both within the baseline's allowed list
        (False, ["IPC_LOCK", "CHOWN", "SYS_ADMIN"], "privileged (capabilities.add: IPC_LOCK, SYS_ADMIN)"),
    ],
    ids=["non-root", "root", "baseline-caps", "caps-beyond-baseline"],
)
def test_each_pod_is_labelled_with_its_security_level(non_root: bool, caps: list[str] | None, level: str) -> None:
    for kind in ("Deployment", "Job"):
        obj = {**deployment(non_root=non_root, caps=caps), "kind": kind}
        first = to_yaml([obj]).splitlines()[1]
        assert first == f"# Pod Security Standards level: {level}."


def test_a_pod_without_a_security_context_is_baseline() -> None:
    obj = deployment(non_root=True)
    del obj["spec"]["template"]["spec"]["securityContext"]
    level = "baseline (root in the Neuron DLC, /dev/shm, S3 volume)"
    assert to_yaml([obj]).splitlines()[1] == f"# Pod Security Standards level: {level}."


def test_a_placeholder_bucket_is_pointed_out_and_a_real_one_is_not() -> None:
    def pv(bucket: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "w"},
                "spec": {"csi": {"volumeAttributes": {"bucketName": bucket}}}}  # fmt: skip

    text = to_yaml([pv("REPLACE-ME")])
    assert text.splitlines()[1] == (
        "# Placeholder bucket: set s3.bucket to the bucket holding your weights and compiled artifacts."
    )
    assert not to_yaml([pv("my-weights")]).splitlines()[1].startswith("#")
    # a volume that is not a CSI one (hostPath), or a CSI one without attributes: nothing to fill in
    host = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "h"},
        "spec": {"hostPath": {"path": "/x"}},
    }
    assert (
        to_yaml([host])
        == "---\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: h\nspec:\n  hostPath:\n    path: /x\n"
    )
    bare = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "b"}, "spec": {"csi": {"driver": "d"}}}
    assert not to_yaml([bare]).splitlines()[1].startswith("#")
    # a ConfigMap is not a pod: no security comment, and no other
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    assert to_yaml([cm]) == "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n"


def test_documents_keep_their_key_order_block_literals_long_lines_and_unicode() -> None:
    long = " ".join(["word"] * 40)  # 199 characters with spaces: a folding width would break it
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"},
          "data": {"script.sh": "set -e\necho é\n", "one": "a line\n", "long": long, "z": "1", "a": "2"}}  # fmt: skip
    assert to_yaml([cm, cm]) == 2 * (
        "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: c\ndata:\n"
        "  script.sh: |\n    set -e\n    echo é\n"
        "  one: |\n    a line\n"
        f"  long: {long}\n"
        "  z: '1'\n  a: '2'\n"
    )
    assert to_yaml([]) == ""


@pytest.mark.parametrize(
    ("index", "obj", "name"),
    [
        (1, {"kind": "Deployment", "metadata": {"name": "spectrn-baseline"}}, "01-deployment-spectrn-baseline.yaml"),
        (
            12,
            {"kind": "PersistentVolumeClaim", "metadata": {"name": "Weights_V2.x"}},
            "12-persistentvolumeclaim-weights-v2.x.yaml",
        ),
        (3, {"kind": "Role", "metadata": {"name": "...__"}}, "03-role-object.yaml"),
        (100, {"kind": "Cluster Role!", "metadata": {"name": "-a-"}}, "100-cluster-role-a.yaml"),
    ],
    ids=["plain", "upper-and-underscores", "nothing-left", "kind-with-symbols"],
)
def test_file_names_number_kind_and_name(index: int, obj: dict[str, Any], name: str) -> None:
    assert object_filename(index, obj) == name


def test_output_folder_is_created_and_a_file_in_its_place_is_refused(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    assert output_folder(nested) == nested and nested.is_dir()
    assert output_folder(nested) == nested  # exists already: fine
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as e:
        output_folder(blocker)
    assert (e.value.message, e.value.hint) == (
        f"render output folder {blocker} exists and is not a folder", "choose another path")  # fmt: skip
    with pytest.raises(ConfigError) as e:
        output_folder(blocker / "below")
    assert e.value.message.startswith(f"render output folder {blocker / 'below'} cannot be created: ")
    assert e.value.hint == "check permissions"


def test_write_objects_numbers_from_one_in_order_one_object_per_file(tmp_path: Path) -> None:
    objs = [SA, deployment(non_root=True)]
    paths = write_objects(objs, tmp_path / "out")
    assert [p.name for p in paths] == ["01-serviceaccount-spectrn-server.yaml", "02-deployment-spectrn-baseline.yaml"]
    assert [p.parent for p in paths] == [tmp_path / "out"] * 2
    for p, o in zip(paths, objs, strict=True):
        assert p.read_text(encoding="utf-8") == to_yaml([o])
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == [p.name for p in paths]  # no temporary left


def test_a_symlink_planted_under_a_files_name_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "01-serviceaccount-spectrn-server.yaml").symlink_to(elsewhere / "target.yaml")
    with pytest.raises(ConfigError) as e:
        write_objects([SA], out)
    assert e.value.message == f"{out / '01-serviceaccount-spectrn-server.yaml'} does not lead into {out}"
    assert e.value.hint == "remove it, or choose an empty folder"
    assert not (elsewhere / "target.yaml").exists()
