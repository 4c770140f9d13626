"""`attrib demo`, `inspect` and `images build`: the sample tree, static kernel metrics and the
container images, each a tool beside the search."""

from __future__ import annotations

import json
import shutil
from contextlib import nullcontext
from pathlib import Path

import typer
from rich.console import Console

from attrib.cli.guard import EXIT_FAILURE, EXIT_OK, guard
from attrib.cli.options import BenchOpt, ExecOpt, SeedOpt, WorkOpt, progress
from attrib.cli.run import emit
from attrib.core.model import VerifyMode
from attrib.core.stats import TestConfig
from attrib.errors import GpuUnavailable, InputError
from attrib.progress import RichProgress

DEMO_DIR = Path("attrib-demo")
DEMO_MARKER = ".attrib-demo"


def register(app: typer.Typer) -> None:
    app.command()(demo)
    app.command("inspect")(inspect_cmd)
    images_app = typer.Typer(no_args_is_help=True, help="Container images for --executor docker.")
    app.add_typer(images_app, name="images")
    images_app.command("build")(images_build)


DEMO_RUNNERS = ("auto", "cupy", "command")


def demo(
    directory: Path = typer.Option(DEMO_DIR, "--dir", help="Where the sample tree, cache and report go."),
    seed: int = SeedOpt,
    runner: str = typer.Option(
        "auto",
        "--runner",
        help="cupy: time the tree's GEMM on the GPU; command: the CPU benchmark; auto: cupy when a GPU is usable.",
    ),
) -> None:
    """Generate the sample kernel tree (60+ commits, a planted slowdown, a broken stretch,
    churn) and bisect it with the local executor: on the GPU when there is one, else on the CPU."""
    from attrib.demo import DEMO_CUPY_RECIPE, DEMO_RECIPE, TreeSpec, generate_tree
    from attrib.job import plan, run_bisect

    def go() -> int:
        if runner not in DEMO_RUNNERS:
            raise InputError(f"--runner {runner!r}: expected one of: {', '.join(DEMO_RUNNERS)}")
        from attrib.evaluate.gpu.device import probe

        why = probe() if runner != "command" else "not asked for"
        if runner == "cupy" and why:  # before anything is written
            raise GpuUnavailable(f"benchmark 'gemm-bf16' times kernels on a GPU, and there is none here: {why}")
        use_gpu = runner != "command" and not why
        if runner == "auto" and why:
            typer.echo(f"no usable GPU ({why}): using the CPU benchmark (recipes/demo-cpu.toml)")
        if directory.exists():
            if not (directory / DEMO_MARKER).exists():
                raise InputError(f"--dir {directory}: exists and is not an attrib demo directory; choose another")
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        (directory / DEMO_MARKER).write_text("made by attrib demo; safe to delete\n")
        name, text = ("demo-cupy.toml", DEMO_CUPY_RECIPE) if use_gpu else ("demo-cpu.toml", DEMO_RECIPE)
        recipe_path = directory / name
        recipe_path.write_text(text)
        if use_gpu:
            typer.echo(
                "GPU found: bisecting the tree's bf16 tensor-core GEMM with the cupy runner (recipes/demo-cupy.toml)"
            )
        typer.echo(f"generating the sample tree in {directory / 'repo'} ...")
        tree = generate_tree(directory / "repo", TreeSpec(seed=seed))
        typer.echo(
            f"planted: {len(tree.culprits)} slowdown at {tree.culprits[0][:10]}, {len(tree.broken)} commits that do not build"
        )
        p = plan(tree.path, tree.good, tree.bad, recipe_path, [], "local", directory / "work")
        typer.echo(f"runner: {p.bench.runner} (benchmark '{p.bench.name}' of {name}; docs/recipes.md lists the runners)")
        shown = progress()
        with shown if isinstance(shown, RichProgress) else nullcontext():
            result = run_bisect(p, TestConfig(), seed, shown, verify=VerifyMode.REVERT)
        code = emit(result, directory / "result.json", directory / "report.md")
        found = [c.commit for c in result.culprits]
        typer.echo(
            "the planted culprit was "
            + ("found" if found == tree.culprits else f"NOT found (expected {tree.culprits[0]})")
        )
        return code

    guard(go)


def inspect_cmd(
    recipe: Path | None = typer.Option(
        None, "--recipe", help="Inspect this recipe's cupy benchmarks (default: attrib's kernel suite)."
    ),
    benchmark: str | None = BenchOpt,
    repo: Path = typer.Option(Path("."), "--repo", help="Repository whose tree provides sources and headers."),
    commit: str | None = typer.Option(
        None, "--commit", help="Build this revision and compile from its checkout (default: the working tree as it is)."
    ),
    arch: list[str] | None = typer.Option(
        None, "--arch", help="Architecture(s) to compile for (default: the recipe's, else sm_90)."
    ),
    executor: str = ExecOpt,
    workdir: Path | None = WorkOpt,
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Static kernel metrics from NVRTC (registers, spills, stack, shared memory, binary size); no GPU needed.
    Exit 0, or 1 when a kernel does not compile."""
    from rich.table import Table

    from attrib.evaluate.gpu.inspection import COLUMNS, inspect, targets_from_recipe, targets_from_suite
    from attrib.job import built_checkout
    from attrib.recipe import load_recipe

    def go() -> int:
        archs: tuple[str, ...] = tuple(arch or ())
        if recipe is None:
            if commit is not None:
                raise InputError("--commit needs --recipe: the recipe says how to build the tree and what to compile")
            targets = targets_from_suite()
            archs = archs or ("sm_90",)
        else:
            loaded = load_recipe(recipe)
            checkout = built_checkout(repo, commit, loaded, executor, workdir) if commit else repo.resolve()
            targets = targets_from_recipe(loaded, benchmark, checkout)
            if not archs:
                archs = tuple(dict.fromkeys(a for b in loaded.benchmarks if b.cupy for a in b.cupy.archs))
        rows = inspect(targets, archs)
        if json_out:
            typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        else:
            table = Table("benchmark", "function", "arch", *COLUMNS)
            for r in rows:
                if r.metrics is None:
                    table.add_row(r.benchmark, r.function, r.arch, r.error or "no ptxas report")
                else:
                    table.add_row(r.benchmark, r.function, r.arch, *(str(r.metrics.value(c)) for c in COLUMNS))
            Console(width=200).print(table)
        return EXIT_FAILURE if any(r.error for r in rows) else EXIT_OK

    guard(go)


def images_build(
    force: bool = typer.Option(False, "--force", help="Rebuild images that exist."),
    suite: str = typer.Option("bookworm", "--suite", help="Debian suite of the base image."),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian mirror for debootstrap."),
) -> None:
    """Make attrib/debian-base (debootstrap + docker import, no registry needed) and attrib/cpu."""
    from attrib.evaluate.executors.docker import connect
    from attrib.evaluate.images import build_base, build_cpu

    def go() -> int:
        client = connect()
        build_base(client, suite=suite, mirror=mirror, force=force, log=typer.echo)
        build_cpu(client, force=force, log=typer.echo)
        return EXIT_OK

    guard(go)
