"""The template layer as a user meets it: the whole text of every ``RenderError`` a broken template or a broken
install produces (what ``spectrn render`` prints after ``RenderError:``), which rendered documents the object
check keeps or refuses, and a prompt file's non-ASCII text reaching the prompts ConfigMap unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest

from spectrn import paths
from spectrn.errors import RenderError
from spectrn.render import manifests as render
from spectrn.render.templates import _Renderer

FIX = " (fix: this is a bug in spectrn's manifests)"
LABELS = "{app.kubernetes.io/managed-by: spectrn, spectrn.io/component: test}"


def _renderer(make_cfg: Any, **templates: str) -> _Renderer:
    r = _Renderer(make_cfg())
    r.env.loader = jinja2.DictLoader(templates)
    return r


def _render_error(r: _Renderer, template: str) -> str:
    with pytest.raises(RenderError) as info:
        r.render(template)
    assert info.value.exit_code == 3
    return str(info.value)


# ---- the check of every rendered document --------------------------------------------------------


def test_an_empty_document_is_skipped_and_the_documents_after_it_are_kept(make_cfg) -> None:
    text = f"---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, labels: {LABELS}}}\n"
    text += f"---\napiVersion: v1\nkind: Secret\nmetadata: {{name: b, labels: {LABELS}}}\n"
    r = _renderer(make_cfg, **{"two.yaml.j2": text})
    labels = {"app.kubernetes.io/managed-by": "spectrn", "spectrn.io/component": "test"}
    assert r.render("two.yaml.j2") == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": labels}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b", "labels": labels}},
    ]


def test_a_document_that_is_not_a_mapping_is_named_by_its_template_position_and_type(make_cfg) -> None:
    good = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, labels: {LABELS}}}\n"
    r = _renderer(make_cfg, **{"list.yaml.j2": good + "---\n- 1\n- 2\n"})
    assert _render_error(r, "list.yaml.j2") == "list.yaml.j2 document 2 is a list, not a Kubernetes object"
    r = _renderer(make_cfg, **{"str.yaml.j2": "just words\n"})
    assert _render_error(r, "str.yaml.j2") == "str.yaml.j2 document 1 is a str, not a Kubernetes object"


@pytest.mark.parametrize(
    "metadata",
    [
        "",  # no metadata at all
        "metadata: [a]\n",  # metadata that is not a mapping
        f"metadata: {{labels: {LABELS}}}\n",  # no name
        f"metadata: {{name: '', labels: {LABELS}}}\n",  # an empty name
        f"metadata: {{name: 5, labels: {LABELS}}}\n",  # a name that is not a string
        f"metadata: {{name: null, labels: {LABELS}}}\n",
    ],
)
def test_a_document_without_a_string_name_is_refused_with_its_kind(make_cfg, metadata: str) -> None:
    r = _renderer(make_cfg, **{"noname.yaml.j2": "apiVersion: v1\nkind: Service\n" + metadata})
    assert _render_error(r, "noname.yaml.j2") == "noname.yaml.j2 document 1 (Service) has no metadata.name"


@pytest.mark.parametrize(
    "labels",
    [
        "{}",
        "{spectrn.io/component: test}",  # not managed by spectrn
        "{app.kubernetes.io/managed-by: helm, spectrn.io/component: test}",
        "{app.kubernetes.io/managed-by: spectrn}",  # managed by spectrn, but no component
    ],
)
def test_a_document_without_both_of_spectrns_labels_is_refused(make_cfg, labels: str) -> None:
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm, labels: {labels}}}\n"
    r = _renderer(make_cfg, **{"labels.yaml.j2": text})
    assert _render_error(r, "labels.yaml.j2") == "labels.yaml.j2 document 1 (ConfigMap cm) lacks spectrn's labels"


# ---- template errors and a broken install ------------------------------------------------------------


def test_an_undefined_template_variable_names_the_template_and_the_variable(make_cfg) -> None:
    r = _renderer(make_cfg, **{"undefined.yaml.j2": "kind: {{ missing }}\n"})
    with pytest.raises(RenderError) as info:
        r.render_text("undefined.yaml.j2")
    assert str(info.value) == "template undefined.yaml.j2: 'missing' is undefined" + FIX


def test_a_template_syntax_error_names_the_template_and_jinjas_complaint(make_cfg) -> None:
    r = _renderer(make_cfg, **{"syntax.yaml.j2": "{% if %}\n"})
    with pytest.raises(RenderError) as info:
        r.render_text("syntax.yaml.j2")
    assert str(info.value) == "template syntax.yaml.j2: Expected an expression, got 'end of statement block'" + FIX


def test_a_missing_template_is_a_render_error_that_names_it(make_cfg) -> None:
    r = _renderer(make_cfg)
    with pytest.raises(RenderError) as info:
        r.render_text("gone.yaml.j2")
    assert str(info.value) == "template gone.yaml.j2: gone.yaml.j2" + FIX


def test_an_install_without_the_manifests_folder_says_to_reinstall(make_cfg, monkeypatch, tmp_path: Path) -> None:
    # neither <package>/manifests (a wheel) nor <repository>/manifests (a checkout) exists
    monkeypatch.setattr(paths, "_PKG", tmp_path / "site-packages" / "lib" / "spectrn")
    with pytest.raises(RenderError) as info:
        _Renderer(make_cfg())
    assert str(info.value) == (
        "spectrn data folder 'manifests' is missing from the installation "
        "(fix: reinstall spectrn; the wheel ships spectrn/manifests)"
    )
    assert info.value.exit_code == 3


# ---- values entering templates through the j filter -------------------------------------------------------


def test_a_prompt_file_with_text_beyond_the_basic_plane_reaches_the_configmap_unchanged(make_cfg) -> None:
    # JSON's ASCII escapes write an emoji as a surrogate pair, which YAML reads back as two lone surrogates
    text = 'name: mine\nprompts:\n  - id: smile\n    class: chat\n    text: "café \U0001f600 \u6f22\u5b57"\n'
    objs = render.render_objects(make_cfg(), components=["prompts"], prompts={"mine.yaml": text})
    assert objs == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "spectrn-prompts",
                "namespace": "spectrn",
                "labels": {
                    "app.kubernetes.io/managed-by": "spectrn",
                    "app.kubernetes.io/part-of": "spectrn",
                    "spectrn.io/component": "prompts",
                    "spectrn.io/namespace": "spectrn",
                },
            },
            "data": {"mine.yaml": text},
        }
    ]
