"""The dev tools' own input checks (CPU only): tools/ab_variants.py's variant specs and sources."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import ab_variants  # noqa: E402


def test_variant_spec_parts():
    assert ab_variants.parse_spec("main=@main") == ("main", "@main", "")
    assert ab_variants.parse_spec("nl=solution.py|-DVAE_WG_NO_LOAD -DX") == ("nl", "solution.py", "-DVAE_WG_NO_LOAD -DX")


@pytest.mark.parametrize("spec", ["main", "=solution.py", "1st=solution.py", "a=", "a b=solution.py"])
def test_variant_spec_rejected_with_its_text(spec):
    with pytest.raises(ValueError, match="NAME=SOURCE"):
        ab_variants.parse_spec(spec)


def test_variant_source_file_must_exist(tmp_path):
    with pytest.raises(ValueError, match="no such solution file"):
        ab_variants.source_path(str(tmp_path / "missing.py"))


def test_variant_source_at_a_revision_is_that_revisions_solution():
    head = subprocess.run(["git", "-C", ab_variants.REPO, "show", "HEAD:solution.py"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout with solution.py committed")
    path = ab_variants.source_path("@HEAD")
    with open(path) as f:
        assert f.read() == head.stdout
    assert path.endswith(os.path.join("build", "ab", "HEAD", "solution.py"))
    with pytest.raises(ValueError, match="git show no-such-rev"):
        ab_variants.source_path("@no-such-rev")


@pytest.mark.parametrize("rev", ["", "a b", "../x", "a;rm"])
def test_variant_revision_rejected_when_not_a_plain_name(rev):
    with pytest.raises(ValueError, match="letters, digits"):
        ab_variants.source_path("@" + rev)


def test_each_variant_builds_its_own_extension():
    # two variants with the same flags (one source at two revisions) must not share a build
    assert ab_variants.build_flags("a", "-DX") != ab_variants.build_flags("b", "-DX")
    assert ab_variants.build_flags("a", "") == "-DVAE_AB_a"


def test_variant_revision_read_from_the_saved_copy_where_there_is_no_git(tmp_path, monkeypatch):
    # the GPU machine gets the working tree without .git: @REV reads what --save wrote and was carried
    saved = tmp_path / "build" / "ab" / "main" / "solution.py"
    saved.parent.mkdir(parents=True)
    saved.write_text("# solution.py at main\n")
    monkeypatch.setattr(ab_variants, "REPO", str(tmp_path))
    assert ab_variants.source_path("@main") == str(saved)
    with pytest.raises(ValueError, match="no saved copy"):
        ab_variants.source_path("@other")
