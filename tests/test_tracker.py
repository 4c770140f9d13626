"""Filing into GitHub, GitLab and a directory, against a strict local server (fake_tracker.py):
what the server received is what is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import run_cli, spec
from fake_tracker import FakeTracker
from sim_results import simulated_result

from attrib.errors import InputError, TrackerError
from attrib.result import dump
from attrib.tracker import comment_on, file_issues, fingerprint, open_sink, parse_target

TOKEN = "ghp_s3cret-t0ken-value"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim")
    return {name: simulated_result(name, tmp) for name in ("culprit", "two_culprits", "not_reproduced")}


@pytest.fixture
def server():
    with FakeTracker(TOKEN, projects=("acme/kernels", "gpu/compilers/nvcc")) as fake:
        yield fake


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)  # tests never wait; they check how long the client would have


def github(server, sleeps=None, token=TOKEN):
    return open_sink(parse_target("github:acme/kernels"), {"GITHUB_TOKEN": token, "GITHUB_API_URL": server.url}, sleeps)


def gitlab(server, sleeps=None, token=TOKEN):
    env = {"GITLAB_TOKEN": token, "CI_API_V4_URL": server.url}
    return open_sink(parse_target("gitlab:gpu/compilers/nvcc"), env, sleeps)


@pytest.mark.parametrize(
    "bad", ["gitlub:x", "github:", "github:acme", "github:a/b/c", "dir:", "acme/kernels", "gitlab:g p/x"]
)
def test_a_bad_target_is_one_line_naming_the_forms(bad):
    with pytest.raises(InputError) as exc:
        parse_target(bad)
    assert str(exc.value) == f"--file-issue {bad!r}: expected github:OWNER/REPO, gitlab:GROUP/PROJECT or dir:PATH"


def test_targets_parse():
    assert parse_target("github:acme/kernels").project == "acme/kernels"
    assert parse_target("gitlab:gpu/compilers/nvcc").project == "gpu/compilers/nvcc"
    assert parse_target("github:acme/kernels#12", "--comment-on").number == 12
    with pytest.raises(InputError, match="expected github:OWNER/REPO#NUMBER"):
        parse_target("github:acme/kernels", "--comment-on")


def test_github_files_once_then_comments(server, results):
    r = results["culprit"]
    culprit = r.culprits[0]
    server.logins[culprit.commit] = "ada-l"
    sink = github(server)
    first = file_issues(r, sink, ["performance-regression", "gemm"])
    assert [f.action for f in first] == ["opened"]
    [issue] = server.issues["acme/kernels"]
    assert issue.labels == ["performance-regression", "gemm"]
    fp = fingerprint("acme/kernels", culprit.commit)
    assert f"<!-- attrib-fingerprint: {fp} -->" in issue.body
    assert "cc @ada-l:" in issue.body and culprit.commit in issue.body and "## Tested commits" in issue.body
    assert culprit.subject in issue.title and "+9" in issue.title
    second = file_issues(r, github(server), ["performance-regression", "gemm"])
    assert [f.action for f in second] == ["commented"]
    assert len(server.issues["acme/kernels"]) == 1 and len(issue.comments) == 1
    assert "measured this regression again" in issue.comments[0] and "@ada-l" not in issue.comments[0]
    for rec in server.received:
        assert rec.headers["authorization"] == f"Bearer {TOKEN}"
    # The list scan asked for open issues with the first label.
    scans = [x for x in server.received if x.method == "GET" and x.path.endswith("/issues")]
    assert scans and all(x.query["state"] == ["open"] and x.query["labels"] == ["performance-regression"] for x in scans)


def test_no_login_means_the_name_without_at(server, results):
    file_issues(results["culprit"], github(server), ["performance-regression"])
    body = server.issues["acme/kernels"][0].body
    assert "cc Katherine Johnson:" in body and "@" not in body.split("\n")[2]


def test_two_culprits_are_two_issues(server, results):
    filed = file_issues(results["two_culprits"], github(server), ["performance-regression"])
    assert [f.action for f in filed] == ["opened", "opened"]
    titles = [i.title for i in server.issues["acme/kernels"]]
    assert [c.commit[:10] in t for c, t in zip(results["two_culprits"].culprits, titles, strict=True)] == [True] * 2


def test_gitlab_files_once_then_comments(server, results):
    r = results["culprit"]
    assert file_issues(r, gitlab(server), ["performance-regression", "gemm"])[0].action == "opened"
    assert file_issues(r, gitlab(server), ["performance-regression", "gemm"])[0].action == "commented"
    [issue] = server.issues["gpu/compilers/nvcc"]
    assert issue.labels == ["performance-regression", "gemm"] and len(issue.comments) == 1
    assert all(rec.headers["private-token"] == TOKEN for rec in server.received)
    assert all(rec.path.startswith("/projects/gpu%2Fcompilers%2Fnvcc/") for rec in server.received)
    searches = [x for x in server.received if x.method == "GET"]
    fp = fingerprint("gpu/compilers/nvcc", r.culprits[0].commit)
    assert searches[0].query["search"] == [fp] and searches[0].query["state"] == ["opened"]


def test_other_outcomes_are_not_filed_but_go_where_asked(server, results):
    r = results["not_reproduced"]
    assert [f.action for f in file_issues(r, github(server), ["performance-regression"])] == ["skipped"]
    assert server.posts() == [] and server.issues["acme/kernels"] == []
    # The triggering issue exists (someone opened it); the report goes there as a comment.
    sink = github(server)
    server.issues["acme/kernels"].append(__import__("fake_tracker").Issue(7, "gemm slower?", "", []))
    comment_on(r, sink, 7)
    assert "**Not reproduced**" in server.issues["acme/kernels"][0].comments[0]


def test_5xx_is_retried_with_exponential_backoff(server, results):
    sleeps = Sleeps()
    server.fail_next(2, 500)
    assert file_issues(results["culprit"], github(server, sleeps), ["performance-regression"])[0].action == "opened"
    assert sleeps == [1.0, 2.0]
    assert len(server.issues["acme/kernels"]) == 1


def test_retries_are_bounded(server, results):
    sleeps = Sleeps()
    server.fail_next(10, 503)
    with pytest.raises(TrackerError, match=r"^github:acme/kernels: GET .*503 server error after 5 attempts$"):
        file_issues(results["culprit"], github(server, sleeps), ["performance-regression"])
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert len(server.received) == 5


def test_429_waits_as_long_as_retry_after_says(server, results):
    sleeps = Sleeps()
    server.fail_next(1, 429, retry_after="7")
    file_issues(results["culprit"], github(server, sleeps), ["performance-regression"])
    assert sleeps == [7.0] and len(server.issues["acme/kernels"]) == 1


def test_a_retry_after_beyond_the_bound_is_an_error_not_a_hang(server, results):
    server.fail_next(1, 429, retry_after="3600")
    with pytest.raises(TrackerError, match="asks to wait 3600 s"):
        file_issues(results["culprit"], github(server, Sleeps()), ["performance-regression"])


@pytest.mark.parametrize("sink", [github, gitlab])
def test_a_dropped_post_that_succeeded_is_not_filed_twice(server, results, sink):
    sleeps = Sleeps()
    server.drop_next_post()
    filed = file_issues(results["culprit"], sink(server, sleeps), ["performance-regression"])
    assert filed[0].action == "opened"
    project = "acme/kernels" if sink is github else "gpu/compilers/nvcc"
    assert len(server.issues[project]) == 1
    assert len(server.posts()) == 1, "the client re-searched and found its issue instead of posting again"
    assert sleeps == [1.0]


def test_a_dropped_comment_is_not_posted_twice(server, results):
    r = results["culprit"]
    file_issues(r, github(server), ["performance-regression"])
    server.drop_next_post()
    assert file_issues(r, github(server, Sleeps()), ["performance-regression"])[0].action == "commented"
    assert len(server.issues["acme/kernels"][0].comments) == 1


def test_auth_and_permission_errors_are_one_clear_line(server, results):
    with pytest.raises(TrackerError) as exc:
        file_issues(results["culprit"], github(server, token="wrong"), ["performance-regression"])
    assert str(exc.value) == "github:acme/kernels: 401 Unauthorized — GITHUB_TOKEN is wrong or expired"
    server.fail_next(1, 403)
    with pytest.raises(TrackerError) as exc:
        file_issues(results["culprit"], github(server), ["performance-regression"])
    assert str(exc.value) == "github:acme/kernels: 403 Forbidden — the token needs issues:read"
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url}
    with pytest.raises(TrackerError) as exc:
        file_issues(results["culprit"], open_sink(parse_target("github:acme/nope"), env), ["x"])
    assert str(exc.value).startswith("github:acme/nope: 404 Not Found — no such project")
    with pytest.raises(TrackerError, match="^gitlab:gpu/compilers/nvcc: GITLAB_TOKEN is not set"):
        open_sink(parse_target("gitlab:gpu/compilers/nvcc"), {})


def test_the_strict_server_rejects_what_a_sloppy_client_would_send(server):
    # The fake is only worth something if it says no: unknown fields, wrong types, no auth.
    sink = github(server)
    with pytest.raises(TrackerError, match="422"):
        sink.http.request("POST", "/repos/acme/kernels/issues", body={"title": "x", "labelz": []}, need="issues:write")
    with pytest.raises(TrackerError, match="422"):
        sink.http.request("POST", "/repos/acme/kernels/issues", body={"title": "x", "labels": "a,b"}, need="issues:write")
    gl = gitlab(server)
    with pytest.raises(TrackerError, match="400"):
        gl.http.request("POST", gl.path + "/issues", body={"title": "x", "labels": ["a"]}, need="api")
    with pytest.raises(TrackerError, match="404"):
        sink.http.request("GET", "/repos/acme/kernels/pulls", need="x")
    assert server.issues["acme/kernels"] == [] and server.issues["gpu/compilers/nvcc"] == []


def test_dir_sink_dedups_by_fingerprint(tmp_path, results):
    r = results["culprit"]
    sink = open_sink(parse_target(f"dir:{tmp_path / 'reports'}"))
    plot = tmp_path / "p.png"
    plot.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    assert file_issues(r, sink, ["performance-regression"], plot)[0].action == "opened"
    assert file_issues(r, sink, ["performance-regression"], plot)[0].action == "commented"
    [folder] = (tmp_path / "reports").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["plot-2.png", "plot.png", "report.md"]
    text = (folder / "report.md").read_text()
    assert text.count("<!-- attrib-fingerprint:") == 2 and "## Comment 1" in text
    assert "](plot.png)" in text and "](plot-2.png)" in text


def test_cli_report_files_and_keeps_the_token_secret(server, results, tmp_path):
    (tmp_path / "result.json").write_text(dump(results["culprit"]))
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url}
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "report", str(tmp_path / "result.json"), "--out", str(tmp_path / "r.md"),
         "--file-issue", "github:acme/kernels", "--label", "perf", "--label", "gemm"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "opened: https://github.test/acme/kernels/issues/1" in proc.stdout
    assert server.issues["acme/kernels"][0].labels == ["perf", "gemm"]
    everything = proc.stdout + proc.stderr + (tmp_path / "r.md").read_text() + server.issues["acme/kernels"][0].body
    assert TOKEN not in everything
    # The filed body is the report with its local plot link replaced by the line saying where it is.
    note = (
        "The plot is not attached on GitHub (its REST API takes no attachments); "
        f"it is at `{(tmp_path / 'r.png').resolve()}` on the machine that ran attrib."
    )
    report = (tmp_path / "r.md").read_text()
    assert report.replace("![gemm_fp16 per tested commit](r.png)", note) in server.issues["acme/kernels"][0].body
    bad = run_cli("report", tmp_path / "result.json", "--file-issue", "gitlub:x")
    assert bad.code == 2
    assert bad.stderr.strip() == (
        "attrib: error: --file-issue 'gitlub:x': expected github:OWNER/REPO, gitlab:GROUP/PROJECT or dir:PATH"
    )


def test_cli_filing_failure_is_exit_1_after_the_report_is_written(server, results, tmp_path):
    (tmp_path / "result.json").write_text(dump(results["culprit"]))
    env = {**os.environ, "GITHUB_TOKEN": "wrong", "GITHUB_API_URL": server.url}
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "report", str(tmp_path / "result.json"), "--out", str(tmp_path / "r.md"),
         "--file-issue", "github:acme/kernels"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip() == "attrib: error: github:acme/kernels: 401 Unauthorized — GITHUB_TOKEN is wrong or expired"
    assert (tmp_path / "r.md").exists()


@pytest.mark.slow
def test_bisect_files_one_issue_then_comments(server, make_tree, demo_recipe, tmp_path):
    tree = make_tree(spec(commits=24, culprits=((13, 10),), broken=None))
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": server.url}
    def argv(n: int) -> list[str]:
        return [sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good,
                "--bad", tree.bad, "--recipe", str(demo_recipe), "--workdir", str(tmp_path / "work"),
                "--json", str(tmp_path / f"r{n}.json"), "--report", str(tmp_path / f"report{n}.md"),
                "--file-issue", "github:acme/kernels"]  # fmt: skip

    runs = [subprocess.run(argv(n), capture_output=True, text=True, env=env, timeout=900) for n in (1, 2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
    assert "opened: https://github.test/acme/kernels/issues/1" in runs[0].stdout
    assert "commented: https://github.test/acme/kernels/issues/1#c1" in runs[1].stdout
    [issue] = server.issues["acme/kernels"]
    assert len(issue.comments) == 1
    for n, text in ((1, issue.body), (2, issue.comments[0])):
        result = json.loads((tmp_path / f"r{n}.json").read_text())
        assert [c["commit"] for c in result["culprits"]] == tree.culprits
        report = (tmp_path / f"report{n}.md").read_text()
        # The tracker gets the full report; only the plot link differs (GitHub's API takes no
        # attachments): the body says so and where the PNG is instead.
        png = (tmp_path / f"report{n}.png").resolve()
        note = f"The plot is not attached on GitHub (its REST API takes no attachments); it is at `{png}` on the machine that ran attrib."
        assert report.replace(f"![loop per tested commit](report{n}.png)", note) in text
        assert (tmp_path / f"report{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert TOKEN not in runs[n - 1].stdout + runs[n - 1].stderr + (tmp_path / f"r{n}.json").read_text() + report
    assert issue.labels == ["performance-regression"]


# -- the plot: GitLab uploads it, GitHub says where it is ------------------------------------
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # the magic, then every byte value (CR, LF, "--")
GL = "gpu/compilers/nvcc"


@pytest.fixture
def plot(tmp_path):
    path = tmp_path / "report.png"
    path.write_bytes(PNG)
    return path


def test_gitlab_uploads_the_plot_and_the_issue_embeds_it(server, results, plot):
    log: list[str] = []
    assert file_issues(results["culprit"], gitlab(server), ["performance-regression"], plot, log.append)[0].action == "opened"
    [upload] = server.uploads
    assert upload.project == GL and upload.filename == "plot.png" and upload.content == PNG
    [issue] = server.issues[GL]
    assert f"![plot]({upload.url})" in issue.body and upload.url == f"/uploads/{upload.secret}/plot.png"
    assert "](report.png)" not in issue.body and "could not be attached" not in issue.body
    assert "```text" in issue.body  # the sparkline stays: the text picture for mail and the CLI
    [sent] = [r for r in server.posts() if r.path.endswith("/uploads")]
    assert sent.headers["private-token"] == TOKEN and sent.headers["content-type"].startswith("multipart/form-data;")
    assert log == ["opened: https://gitlab.test/gpu/compilers/nvcc/-/issues/1"]


def test_a_failing_upload_still_files_once_and_says_why(server, results, plot):
    sleeps, log = Sleeps(), []
    server.fail_next(10, 500, path="/uploads")
    filed = file_issues(results["culprit"], gitlab(server, sleeps), ["performance-regression"], plot, log.append)
    assert [f.action for f in filed] == ["opened"]
    uploads = [r for r in server.posts() if r.path.endswith("/uploads")]
    assert len(uploads) == 5 and sleeps == [1.0, 2.0, 4.0, 8.0] and server.uploads == []  # the client's rules
    assert [r.path for r in server.posts() if not r.path.endswith("/uploads")] == [f"/projects/{GL.replace('/', '%2F')}/issues"]
    [issue] = server.issues[GL]
    line = (
        f"The plot could not be attached (upload failed: POST /projects/gpu%2Fcompilers%2Fnvcc/uploads: "
        f"500 server error after 5 attempts); it is at `{plot.resolve()}` on the machine that ran attrib."
    )
    assert f"\n{line}\n" in issue.body and "![" not in issue.body and "```text" in issue.body
    assert log == [f"gitlab:{GL}: {line}", "opened: https://gitlab.test/gpu/compilers/nvcc/-/issues/1"]


def test_an_upload_rate_limited_waits_and_then_attaches(server, results, plot):
    sleeps = Sleeps()
    server.fail_next(1, 429, retry_after="3", path="/uploads")
    file_issues(results["culprit"], gitlab(server, sleeps), ["performance-regression"], plot)
    [upload] = server.uploads
    assert sleeps == [3.0] and f"![plot]({upload.url})" in server.issues[GL][0].body


def test_a_dropped_upload_is_sent_again_and_the_issue_still_filed_once(server, results, plot):
    sleeps = Sleeps()
    server.drop_next_post()  # the first POST is the upload: stored, then no answer
    assert file_issues(results["culprit"], gitlab(server, sleeps), ["performance-regression"], plot)[0].action == "opened"
    first, second = server.uploads  # an unused copy on the server is the whole cost of retrying
    [issue] = server.issues[GL]
    assert f"![plot]({second.url})" in issue.body and first.url not in issue.body


def test_a_comment_on_the_fingerprinted_issue_carries_its_own_uploaded_plot(server, results, plot):
    r = results["culprit"]
    file_issues(r, gitlab(server), ["performance-regression"], plot)
    assert file_issues(r, gitlab(server), ["performance-regression"], plot)[0].action == "commented"
    first, second = server.uploads
    [issue] = server.issues[GL]
    assert f"![plot]({first.url})" in issue.body and f"![plot]({second.url})" in issue.comments[0]
    assert "measured this regression again" in issue.comments[0]
    # --comment-on (any outcome) on the issue that asked carries an uploaded plot too
    comment_on(results["not_reproduced"], gitlab(server), 1, plot)
    assert f"![plot]({server.uploads[2].url})" in issue.comments[1] and "**Not reproduced**" in issue.comments[1]


def test_a_rejected_upload_is_not_retried_and_the_body_says_why(server, results, tmp_path):
    not_png = tmp_path / "plot.png"
    not_png.write_bytes(b"GIF89a")
    sleeps = Sleeps()
    file_issues(results["culprit"], gitlab(server, sleeps), ["performance-regression"], not_png)
    assert sleeps == [] and server.uploads == []
    assert "The plot could not be attached (upload failed: 400 Bad Request — file is not a PNG)" in server.issues[GL][0].body


def test_the_strict_server_rejects_a_sloppy_upload(server):
    from attrib.http import Payload, multipart

    def post(body, token=TOKEN):
        gl = gitlab(server, token=token)
        return gl.http.request("POST", gl.path + "/uploads", body=body, need="api")

    def part(name: str, filename: str) -> bytes:
        return f'--zz\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n\r\n'.encode() + PNG

    with pytest.raises(TrackerError, match="401"):
        post(multipart("file", "plot.png", PNG, "image/png"), token="wrong")
    with pytest.raises(TrackerError, match="400 .*not multipart/form-data"):
        post({"file": "x"})
    with pytest.raises(TrackerError, match="400 .*exactly one part named 'file'"):
        post(multipart("image", "plot.png", PNG, "image/png"))
    two = part("file", "a.png") + b"\r\n" + part("file", "b.png") + b"\r\n--zz--\r\n"
    with pytest.raises(TrackerError, match="400 .*exactly one part"):
        post(Payload(two, "multipart/form-data; boundary=zz"))
    with pytest.raises(TrackerError, match="400 .*malformed"):
        post(Payload(part("file", "a.png"), "multipart/form-data; boundary=zz"))  # never closed
    with pytest.raises(TrackerError, match="400 .*not a PNG"):
        post(multipart("file", "plot.png", b"GIF89a", "image/gif"))
    assert server.uploads == []
    assert post(multipart("file", "plot.png", PNG, "image/png"))["markdown"] == f"![plot]({server.uploads[0].url})"


@pytest.mark.parametrize("kept", [True, False])
def test_github_keeps_the_sparkline_and_says_where_the_plot_is(server, results, plot, kept):
    log: list[str] = []
    file_issues(results["culprit"], github(server), ["performance-regression"], plot, log.append, plot_kept=kept)
    body = server.issues["acme/kernels"][0].body
    where = (
        f"it is at `{plot.resolve()}` on the machine that ran attrib."
        if kept
        else "it was not kept (a report file, --report or --out, keeps it next to the report)."
    )
    line = f"The plot is not attached on GitHub (its REST API takes no attachments); {where}"
    assert f"\n{line}\n" in body and "![" not in body and "```text" in body
    assert log[0] == f"github:acme/kernels: {line}"
    assert not [r for r in server.received if "upload" in r.path]


def test_cli_dir_filing_that_cannot_write_is_one_line_exit_1_after_the_report(results, tmp_path):
    # A file where a folder of the dir: target must go: mkdir fails with ENOTDIR. It was an
    # OSError's traceback (exit 1 by accident); now it is the filing failure's one line.
    (tmp_path / "result.json").write_text(dump(results["culprit"]))
    (tmp_path / "afile").write_text("in the way")
    target = f"dir:{tmp_path / 'afile' / 'reports'}"
    proc = subprocess.run(
        [sys.executable, "-m", "attrib", "report", str(tmp_path / "result.json"), "--out", str(tmp_path / "r.md"),
         "--file-issue", target],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"attrib: error: {target}: cannot write ") and "Not a directory" in line
    assert (tmp_path / "r.md").exists()
    too_long = run_cli("report", tmp_path / "result.json", "--file-issue", f"dir:{tmp_path / ('x' * 300)}")
    assert too_long.code == 2
    assert too_long.stderr.strip().endswith("File name too long")
