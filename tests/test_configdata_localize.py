"""Localization rules: resource selection, each field's value, and what is refused."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from function.configdata.localize import enforce_image_pairs, image_pair_defects, plan_localization
from function.configdata.model import parse_configdata
from function.errors import ComponentError, InvalidConfigData, UnsupportedRule
from function.ocm.images import LocalizedImage, image_table
from function.ocm.model import ComponentVersion, Descriptor, Repository, Resource

D = "sha256:" + "cd" * 32


def image(name: str, ref: str, **extra: str) -> Resource:
    return Resource(
        name,
        "1.0",
        "ociImage",
        "external",
        {"type": "ociArtifact", "imageReference": ref},
        MappingProxyType(dict(extra)),
    )


def cv(*resources: Resource) -> ComponentVersion:
    return ComponentVersion(
        Descriptor("acme.org/app", "1.0.0", "acme", tuple(resources)), Repository("r.io"), D
    )


def localize(config, c: ComponentVersion):
    """plan_localization with the image table the core builds (unpinned references allowed here)."""
    return plan_localization(config, c, image_table(c, allow_unpinned=True))


def cd(rule: str):
    return parse_configdata(
        "apiVersion: config.ocm.software/v1alpha1\nkind: ConfigData\nlocalization:\n" + rule
    )


ALL = """- file: values.yaml
  resource: {name: img}
  image: a.image
  registry: a.registry
  repository: a.repository
  fullyQualifiedRepository: a.fqr
  tag: a.tag
"""


@pytest.mark.parametrize(
    "ref, expected",
    [
        (
            "ghcr.io/stefanprodan/podinfo:6.2.0",
            [
                "ghcr.io/stefanprodan/podinfo:6.2.0",
                "ghcr.io",
                "stefanprodan/podinfo",
                "ghcr.io/stefanprodan/podinfo",
                "6.2.0",
            ],
        ),
        (
            f"ghcr.io/stefanprodan/podinfo:6.2.0@{D}",
            [
                f"ghcr.io/stefanprodan/podinfo@{D}",
                "ghcr.io",
                "stefanprodan/podinfo",
                "ghcr.io/stefanprodan/podinfo",
                f"6.2.0@{D}",
            ],
        ),
        (
            "localhost:5000/x:1",
            ["localhost:5000/x:1", "localhost:5000", "x", "localhost:5000/x", "1"],
        ),
        (
            f"localhost:5000/team/x@{D}",
            [f"localhost:5000/team/x@{D}", "localhost:5000", "team/x", "localhost:5000/team/x", D],
        ),
        (
            "nginx:1.25",
            [
                "index.docker.io/library/nginx:1.25",
                "index.docker.io",
                "library/nginx",
                "index.docker.io/library/nginx",
                "1.25",
            ],
        ),
        (
            f"nginx@{D}",
            [
                f"index.docker.io/library/nginx@{D}",
                "index.docker.io",
                "library/nginx",
                "index.docker.io/library/nginx",
                D,
            ],
        ),
    ],
)
def test_every_field(ref, expected):
    loc = localize(cd(ALL), cv(image("img", ref)))
    assert [(s.field, str(s.path), s.value) for s in loc.substitutions] == list(
        zip(
            ["image", "registry", "repository", "fullyQualifiedRepository", "tag"],
            ["a.image", "a.registry", "a.repository", "a.fqr", "a.tag"],
            expected,
            strict=False,
        )
    )
    assert all(s.rule == "localization[0]" and s.file == "values.yaml" for s in loc.substitutions)


def test_tag_with_digest_is_tag_at_digest_and_clean():
    loc = localize(cd(ALL), cv(image("img", f"ghcr.io/a/b:1@{D}")))
    tag = next(s for s in loc.substitutions if s.field == "tag")
    assert tag.value == f"1@{D}"  # "repository:tag" renders ghcr.io/a/b:1@sha256:… (valid, pinned)
    assert loc.warnings == ()
    assert image_pair_defects(loc.substitutions) == ()


def test_bare_digest_as_tag_is_a_defect_naming_rule_and_fix():
    loc = localize(cd(ALL), cv(image("img", f"ghcr.io/a/b@{D}")))
    (d,) = image_pair_defects(loc.substitutions)
    assert (d.rule, d.field, d.file, d.path) == ("localization[0]", "tag", "values.yaml", "a.tag")
    assert d.where == "ConfigData localization[0].tag (file values.yaml)"
    assert "not a tag" in d.message and "'image' rule" in d.message and "digest field" in d.message


def test_tag_without_digest_does_not_warn_when_pinning_is_not_asked():
    loc = localize(cd(ALL), cv(image("img", "ghcr.io/a/b:1")))
    assert [s.value for s in loc.substitutions if s.field == "tag"] == ["1"]
    assert image_pair_defects(loc.substitutions) == ()
    (w,) = loc.warnings  # the unpinned reference (allowed here) is said once per rule
    assert "not pinned by digest" in w and "--allow-unpinned" in w and "allowUnpinnedImages" in w


REPO_ONLY = "- file: values.yaml\n  resource: {name: img}\n  repository: image.repository\n  tag: image.tag\n"


def test_repository_without_registry_is_a_defect():
    loc = localize(cd(REPO_ONLY), cv(image("img", f"ghcr.io/a/b:1@{D}")))
    assert loc.substitutions[0].value == "a/b"
    (d,) = image_pair_defects(loc.substitutions)
    assert d.field == "repository" and "'ghcr.io'" in d.message and "Docker Hub" in d.message
    assert "fullyQualifiedRepository" in d.message and "'registry' rule" in d.message


def test_repository_with_a_registry_rule_elsewhere_for_the_same_file_is_fine():
    rules = REPO_ONLY + "- file: values.yaml\n  resource: {name: img}\n  registry: image.registry\n"
    loc = localize(cd(rules), cv(image("img", f"ghcr.io/a/b:1@{D}")))
    assert image_pair_defects(loc.substitutions) == ()
    other_file = (
        REPO_ONLY + "- file: other.yaml\n  resource: {name: img}\n  registry: image.registry\n"
    )
    loc = localize(cd(other_file), cv(image("img", f"ghcr.io/a/b:1@{D}")))
    assert [d.field for d in image_pair_defects(loc.substitutions)] == ["repository"]


def test_docker_hub_repository_without_registry_only_warns():
    loc = localize(cd(REPO_ONLY), cv(image("img", f"nginx:1.25@{D}")))
    assert image_pair_defects(loc.substitutions) == ()
    assert (
        "fullyQualifiedRepository" in loc.warnings[0]
        and "localization[0].repository" in loc.warnings[0]
    )


def test_localblob_tag_comes_from_reference_name():
    blob = Resource(
        "img",
        "6.2.0",
        "ociImage",
        "external",
        {
            "type": "LocalBlob/v1",
            "localReference": D,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "referenceName": "upstream/podinfo:6.2.0",
        },
        MappingProxyType({}),
    )
    c = cv(blob)
    # the packaging contract: REPO@localReference
    loc = plan_localization(cd(ALL), c, image_table(c))
    values = {s.field: s.value for s in loc.substitutions}
    assert values["image"] == f"r.io/component-descriptors/acme.org/app@{D}"
    assert values["tag"] == f"6.2.0@{D}"
    assert image_pair_defects(loc.substitutions) == ()
    nameless = Resource(
        "img",
        "6.2.0",
        "ociImage",
        "external",
        {**blob.access, "referenceName": "upstream/podinfo"},
        MappingProxyType({}),
    )
    c = cv(nameless)
    loc = plan_localization(cd(ALL), c, image_table(c))
    assert [d.field for d in image_pair_defects(loc.substitutions)] == ["tag"]


def test_enforce_image_pairs_fatal_names_rule_and_downgrade():
    loc = localize(cd(REPO_ONLY), cv(image("img", f"ghcr.io/a/b@{D}")))
    defects = image_pair_defects(loc.substitutions)
    assert [d.field for d in defects] == ["repository", "tag"]
    with pytest.raises(InvalidConfigData) as e:
        enforce_image_pairs(defects, fatal=True, downgrade="Use --image-pairs warning.")
    assert e.value.where == "ConfigData localization[0].repository (file values.yaml)"
    assert "(and 1 more)" in e.value.message and e.value.message.endswith(
        "Use --image-pairs warning."
    )
    assert e.value.reason == "InvalidImageReference"
    lines = enforce_image_pairs(defects, fatal=False, downgrade="x")
    assert len(lines) == 2 and lines[1].startswith(
        "ConfigData localization[0].tag (file values.yaml): "
    )


def test_extra_identity_is_honoured():
    rule = "- file: d.yaml\n  resource: {name: img, extraIdentity: {arch: arm64}}\n  image: x\n"
    c = cv(image("img", "r.io/a:amd", arch="amd64"), image("img", "r.io/a:arm", arch="arm64"))
    assert localize(cd(rule), c).substitutions[0].value == "r.io/a:arm"


def test_ambiguous_name_is_an_error():
    rule = "- file: d.yaml\n  resource: {name: img}\n  image: x\n"
    c = cv(image("img", "r.io/a:amd", arch="amd64"), image("img", "r.io/a:arm", arch="arm64"))
    with pytest.raises(ComponentError) as e:
        localize(cd(rule), c)
    assert "matches 2 resources" in str(e.value) and "extraIdentity" in str(e.value)
    assert "localization[0].resource" in str(e.value)


def test_missing_resource_is_an_error():
    rule = "- file: d.yaml\n  resource: {name: nope}\n  image: x\n"
    with pytest.raises(ComponentError) as e:
        localize(cd(rule), cv(image("img", "r.io/a:1")))
    assert "no resource with identity {name=nope}" in str(e.value)


def test_cue_mapping_is_unsupported():
    rule = "- file: d.yaml\n  resource: {name: img}\n  mapping: {path: spec, transform: 'out: 1'}\n"
    with pytest.raises(UnsupportedRule) as e:
        localize(cd(rule), cv(image("img", "r.io/a:1")))
    assert "CUE 'mapping' rules are not supported" in str(e.value) and "localization[0]" in str(
        e.value
    )


def test_reference_path_is_unsupported():
    rule = "- file: d.yaml\n  resource: {name: img, referencePath: [{name: sub}]}\n  image: x\n"
    with pytest.raises(UnsupportedRule) as e:
        localize(cd(rule), cv(image("img", "r.io/a:1")))
    assert "referencePath" in str(e.value) and "referenced component" in str(e.value)


def test_rule_without_target_is_an_error():
    with pytest.raises(InvalidConfigData) as e:
        localize(cd("- file: d.yaml\n  resource: {name: img}\n"), cv(image("img", "r.io/a:1")))
    assert "no substitution target given" in str(e.value)


def test_locate_errors_name_the_rule():
    c = cv(image("img", "r.io/a:1"))
    broken = {
        "img": LocalizedImage(
            c.descriptor.resources[0],
            error=ComponentError(
                "component acme.org/app:1.0.0 resource img", "access type 'weird' unsupported"
            ),
        )
    }

    with pytest.raises(ComponentError) as e:
        plan_localization(cd("- file: d.yaml\n  resource: {name: img}\n  image: x\n"), c, broken)
    assert str(e.value).startswith("ConfigData localization[0].resource")
    assert "access type 'weird'" in str(e.value)


def test_default_image_table_uses_the_packaging_contract():
    r = image("img", f"http://127.0.0.1:5000/upstream/podinfo:6.2.0@{D}")
    c = cv(r)
    assert image_table(c)["img"].reference == f"127.0.0.1:5000/upstream/podinfo:6.2.0@{D}"
    loc = plan_localization(
        cd("- file: d.yaml\n  resource: {name: img}\n  image: x\n"), c, image_table(c)
    )
    assert loc.substitutions[0].value == f"127.0.0.1:5000/upstream/podinfo@{D}"


def test_rule_without_resource_is_an_error():
    with pytest.raises(InvalidConfigData) as e:
        localize(cd("- file: d.yaml\n  image: x\n"), cv(image("img", "r.io/a:1")))
    assert "resource is missing" in str(e.value) and "localization[0]" in str(e.value)
