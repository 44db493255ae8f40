"""The README is a short front door whose commands are CI's and whose code runs.

The fast tests read the files: the README's length and links, and its two
shell commands against `.ci/run` and `pyproject.toml`. The slow test runs every
```python block and checks what it prints against independent answers.
"""

import re
import shlex
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_CHARS = 8000
# pytest options that change what a run prints or stores, not what it tests
OUTPUT_FLAGS = {"-q", "-v", "-ra", "-rA"}
OUTPUT_OPTIONS = {"-p": {"no:cacheprovider"}}


def _text():
    return README.read_text(encoding="utf-8")


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", _text(), re.S)


def _steps(command):
    """``a && b`` as a list of argument lists, environment assignments apart."""
    steps = []
    for part in command.split("&&"):
        words = shlex.split(part)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        steps.append((env, words))
    return steps


def _ci_commands():
    """The pip and pytest commands of `.ci/run` as (environment, words), the
    continuation lines joined and the redirections and `&` cut off."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if not re.search(r"\bpip install\b|-m pytest\b", line):
            continue
        for env, words in _steps(" ".join(shlex.split(line, comments=True))):
            cut = [i for i, w in enumerate(words) if w.startswith((">", "2>", "&"))]
            commands.append((env, words[:cut[0]] if cut else words))
    return commands


def _essential(words):
    """A pytest command without the options that only shape its output."""
    out, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in OUTPUT_FLAGS or w.startswith("--durations"):
            continue
        if w in OUTPUT_OPTIONS and i + 1 < len(words) \
                and words[i + 1] in OUTPUT_OPTIONS[w]:
            skip = True
            continue
        out.append(w)
    return out


def _pip_install(words):
    """(editable, target, extras) of a ``pip install`` argument list."""
    assert words[:2] == ["pip", "install"], words
    args = [w for w in words[2:] if w not in {"-q", "--quiet"}]
    editable = "-e" in args or "--editable" in args
    targets = [w for w in args if not w.startswith("-")]
    assert len(targets) == 1, words
    m = re.fullmatch(r"(\.)(?:\[([\w,-]+)\])?", targets[0])
    assert m, f"{targets[0]!r} is not this repository"
    extras = set(m.group(2).split(",")) if m.group(2) else set()
    return editable, m.group(1), extras


def test_readme_is_short_and_links_stay_inside_the_repository():
    text = _text()
    assert len(text) <= MAX_CHARS, f"README.md has {len(text)} characters"
    assert "://" not in text, "the README links outside the repository"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        assert not target.startswith(".."), target
        assert (ROOT / target).exists(), f"README links to a missing {target}"


def test_readme_install_command_installs_the_package_and_runs_the_demo(capsys):
    commands = _blocks("bash")
    assert len(commands) == 2, "the README shows exactly two shell commands"
    (env0, install), (env1, run) = _steps(commands[0].strip())
    assert not env0 and not env1
    editable, target, _ = _pip_install(install)
    assert target == "."
    assert run == ["bayeskde", "demo"]
    # `bayeskde` is the package's console script, and `demo` one of its commands
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["bayeskde"] == "bayeskde.cli:main"
    from bayeskde.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--help"])
    assert exit_.value.code == 0
    assert "usage: bayeskde demo" in capsys.readouterr().out


def test_readme_test_command_is_the_one_ci_runs_in_both_precisions():
    (env0, install), (env1, test) = _steps(_blocks("bash")[1].strip())
    assert not env0 and not env1
    editable, target, extras = _pip_install(install)
    assert editable and target == "." and "test" in extras

    commands = _ci_commands()
    ci_installs = [words for _, words in commands if words[:2] == ["pip", "install"]]
    assert ci_installs, "`.ci/run` installs nothing with pip"
    ci_editable, ci_target, ci_extras = _pip_install(ci_installs[0])
    assert ci_editable and ci_target == target and extras <= ci_extras

    # the runs of the whole suite: `python -m pytest` with no -m selection
    precisions = set()
    for env, words in commands:
        if words[:3] != ["python", "-m", "pytest"] or "-m" in words[3:]:
            continue
        assert _essential(words) == test, (
            f"CI runs {' '.join(words)!r}; the README says {' '.join(test)!r}")
        precisions.add(env.get("JAX_ENABLE_X64"))
    assert precisions == {"0", "1"}, precisions


@pytest.mark.slow
def test_readme_python_blocks_run_and_print_what_they_say(capsys):
    blocks = _blocks("python")
    assert len(blocks) == 2
    runs = []
    for code in blocks:
        namespace = {}
        exec(compile(code, "README.md", "exec"), namespace)
        runs.append((namespace, capsys.readouterr().out))
    (quick, quick_out), (classical, classical_out) = sorted(
        runs, key=lambda run: "InverseGPRegressor" not in run[0])

    # Quickstart: the modes sit on the generator's exact inverses (roots of
    # t + 0.3 sin(2 pi t) = x, found here on a fine grid), one at x = 0.1 and
    # three at x = 0.5, each branch with a real share of the mass.
    lines = re.findall(r"x = ([\d.]+): t = \[([^\]]*)\] with masses \[([^\]]*)\]",
                       quick_out)
    assert len(lines) == 2, quick_out
    grid = np.linspace(0.0, 1.0, 200_001)
    for x, modes, masses in lines:
        modes, masses = np.array(modes.split(), float), np.array(masses.split(), float)
        assert np.all(masses >= 0) and masses.sum() <= 1.02, quick_out
        g = grid + 0.3 * np.sin(2 * np.pi * grid) - float(x)
        above = g > 0
        roots = grid[:-1][above[:-1] != above[1:]]
        assert len(roots) == {"0.1": 1, "0.5": 3}[x]
        found = modes[masses >= 0.1]
        assert len(found) == len(roots), quick_out
        assert np.all(np.abs(np.sort(found) - roots) < 0.05), (roots, quick_out)
    assert quick["draws"].shape == (100, 200, 1)
    # a proper score well below the uniform prior's, E|t - U| - E|U - U'| / 2
    t = quick["s"].t_test[::5]
    prior_crps = np.mean(t**3 / 3 + (1 - t) ** 3 / 3)
    crps = float(re.search(r"CRPS ([\d.]+)", quick_out).group(1))
    assert crps < 0.7 * prior_crps, (crps, prior_crps)

    # Classical: KDE's CV prints the kernel parameters it learned, and the Twin
    # GP meets the paper's MAE (0.116) on its setting.
    best = classical["cv"].best_params_
    assert "gamma" in classical_out and "input_kernel_params" in classical_out
    assert str(best) in classical_out
    assert best["input_kernel_params"]["gamma"] > 0 and best["ridge"] > 0
    mae = float(re.search(r"Twin GP MAE ([\d.]+)", classical_out).group(1))
    assert mae < 0.121, classical_out
