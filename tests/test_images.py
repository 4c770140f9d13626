"""The images `attrib images build` makes (docs/recipes.md, "Containers"): what they carry, and
that one made from other packages or another base is made again instead of used as it is.

The real engine and the images .ci/run builds; skipped without them on a developer machine,
failed in CI (CI=true)."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from attrib.evaluate import images
from attrib.evaluate.images import BASE_IMAGE, BASE_LABEL, BASE_PACKAGES, CPU_IMAGE, PACKAGES_LABEL, stale


def test_an_image_is_stale_unless_its_label_says_what_it_would_be_made_from():
    assert stale({PACKAGES_LABEL: "gcc,make"}, PACKAGES_LABEL, "gcc,make") is None
    assert (
        stale({PACKAGES_LABEL: "gcc"}, PACKAGES_LABEL, "gcc,make")
        == "it was made from attrib.packages 'gcc', not 'gcc,make'"
    )
    assert stale({}, BASE_LABEL, "sha256:1") == "it has no attrib.base label (made by an older attrib)"


@pytest.mark.slow
def test_the_images_say_what_they_were_made_from_and_carry_ccache(engine):
    base = engine.images.get(BASE_IMAGE)
    assert base.labels[PACKAGES_LABEL] == ",".join(BASE_PACKAGES)
    assert engine.images.get(CPU_IMAGE).labels[BASE_LABEL] == base.id
    out = engine.containers.run(CPU_IMAGE, ["ccache", "--version"], remove=True)
    assert out.decode().startswith("ccache version"), out


@pytest.mark.slow
def test_a_cpu_image_made_on_another_base_is_made_again(engine, monkeypatch):
    tag = f"attrib-test/cpu:{uuid.uuid4().hex[:12]}"  # never the shared attrib/cpu
    monkeypatch.setattr(images, "CPU_IMAGE", tag)
    said: list[str] = []
    try:
        old = images._build(
            engine, images.CONTAINERS_DIR, "Dockerfile.cpu", tag, said.append, {BASE_LABEL: "sha256:gone"}
        )
        new = images.build_cpu(engine, log=said.append)
        assert new != old and engine.images.get(tag).labels[BASE_LABEL] == engine.images.get(BASE_IMAGE).id
        assert f"{tag} is made again: it was made from attrib.base 'sha256:gone', not 'sha256:" in "\n".join(said)
        assert images.build_cpu(engine, log=said.append) == new  # now it is what it would be made from
        assert said[-1] == f"{tag} exists ({new[:19]}); --force rebuilds it"
    finally:
        engine.images.remove(tag, force=True)


@pytest.mark.slow
def test_a_recipe_image_is_made_again_when_its_base_or_copied_files_change(engine, tmp_path):
    """A recipe's [build].dockerfile image was tagged by the Dockerfile's text alone, so one
    made on an older base (attrib/cpu made again) or with older COPY'd files was used as it was."""
    base = f"attrib-test/base:{uuid.uuid4().hex[:12]}"
    context = tmp_path / "recipe"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {base}\nCOPY tool.sh /usr/local/bin/tool.sh\n")
    (context / "tool.sh").write_text("echo one\n")
    said: list[str] = []
    made: list[str] = []
    try:
        for label in ("one", "two"):  # the same base tag, made again with other content
            (tmp_path / "base").mkdir(exist_ok=True)
            (tmp_path / "base" / "Dockerfile").write_text(f"FROM {CPU_IMAGE}\nLABEL attrib.test={label}\n")
            images._build(engine, tmp_path / "base", "Dockerfile", base, said.append)
            tag = images.build_recipe_image(engine, context / "Dockerfile", said.append)
            made.append(engine.images.get(tag).id)
            if label == "one":
                assert images.build_recipe_image(engine, context / "Dockerfile", said.append) == tag
                assert engine.images.get(tag).id == made[0]  # unchanged: the same image, said nothing of
                assert not said[-1].startswith(tag)
        assert made[1] != made[0]
        assert said[-1].startswith(f"{tag} made again (") and said[-1].endswith("its base or the files it copies changed")
        (context / "tool.sh").write_text("echo two\n")
        images.build_recipe_image(engine, context / "Dockerfile", said.append)
        out = engine.containers.run(tag, ["sh", "/usr/local/bin/tool.sh"], remove=True, network_mode="none")
        assert out.decode().strip() == "two"
    finally:
        tag = f"{images.RECIPE_IMAGE_REPO}:{hashlib.sha256((context / 'Dockerfile').read_bytes()).hexdigest()[:16]}"
        for t in (tag, base):
            engine.images.remove(t, force=True)
