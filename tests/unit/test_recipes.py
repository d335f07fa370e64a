"""Training recipes as data: parsing, validation errors, the commands they make, GPU refusal, status."""

import io
import json
import shutil
from pathlib import Path

import pytest

from dialogue_ranker.recipes import cli
from dialogue_ranker.recipes.runner import MARKER, Plan, Runner, StageFailed
from dialogue_ranker.recipes.schema import RecipeError, parse_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE_2_8_0 = REPO / "recipes" / "dialogue-minilm-l6-2.8.0.toml"  # two branches, two GPU stages
RECIPE_2_9_0 = REPO / "recipes" / "dialogue-minilm-l6-2.9.0.toml"  # a stage on top of 2.8.0
RECIPE_2_10_0 = REPO / "recipes" / "dialogue-minilm-l6-2.10.0.toml"  # 2.9.0's, written lists added
RECIPE_2_11_19 = REPO / "recipes" / "dialogue-minilm-l6-2.11.19.toml"  # shipped: 2.10.0 trained, moved back
RECIPE_2_11_20 = REPO / "recipes" / "dialogue-minilm-l6-2.11.20.toml"  # 2.11.19 moved further back
RECIPE_2_11_21 = REPO / "recipes" / "dialogue-minilm-l6-2.11.21.toml"  # seed 24's fp32 steps, half back
CPU = REPO / "recipes" / "dialogue-minilm-l6-cpu.toml"

TINY = """
name = "tiny"
version = "1"

[data]
"a.jsonl" = { dataset = "sugar", source = "src/sugar.jsonl" }

[[stages]]
name = "one"
kind = "train"
data = ["a.jsonl:2", "mine/lists.jsonl"]

[[stages]]
name = "two"
kind = "train"
init = "one"
lr = 2e-5
data = ["a.jsonl"]
"""


def fake_repo(tmp_path: Path, text: str) -> Path:
    """``text`` as ``<repo>/recipes/r.toml``, with every source the shipped recipes read present."""
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    for path in ("src/sugar.jsonl", "mine/lists.jsonl"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("{}\n")
    shared = tmp_path / "shared" / "data"
    for path in ("sugar/sugar.jsonl", "dailydialog_pp/dev.jsonl"):
        (shared / path).parent.mkdir(parents=True, exist_ok=True)
        (shared / path).write_text("{}\n")
    (shared / "topical_chat").mkdir()
    recipe = repo / "recipes" / "r.toml"
    recipe.write_text(text)
    return recipe


def argv_of(plan: Plan, stage: str) -> list[str]:
    return next(step.commands[0][1] for step in plan.steps if step.name == stage)


def mark_done(plan: Plan, upto: str) -> None:
    """Markers with the right hash for every step up to and including ``upto``."""
    for step in plan.steps:
        (plan.out / step.name).mkdir(parents=True, exist_ok=True)
        (plan.out / step.name / MARKER).write_text(
            json.dumps({"config_hash": step.config_hash, "seconds": 1})
        )
        if step.name == upto:
            return


# -- the recipes in recipes/ --


def test_the_2_8_0_recipe_is_the_old_makefile_as_data(tmp_path):
    plan = Plan(fake_repo(tmp_path, RECIPE_2_8_0.read_text()))
    recipe = plan.recipe
    assert (recipe.name, recipe.version) == ("dialogue-minilm-l6", "2.8.0")
    assert plan.out_rel == "runs/dialogue-minilm-l6"
    names = [s.name for s in recipe.stages]
    assert names == ["b-1", "b-2", "open-1", "open-2", "soup", "distilled", "bundle",
                     "eval-test", "eval-ddpp", "eval-sugar", "card"]  # fmt: skip
    assert {s.name for s in recipe.stages if s.runs_on == "gpu"} == {"open-1", "distilled"}
    assert "topical-chat-distill.jsonl" in recipe.data
    assert recipe.data["topical-chat-fact-only.jsonl"].negatives == "fact:3"

    d = "runs/dialogue-minilm-l6"
    data = f"{d}/data"
    assert argv_of(plan, "b-2") == [
        "train", "--data", f"{data}/sugar.jsonl:2", "--data", f"{data}/topical-chat-entity-fact.jsonl:0.04",
        "--data", f"{data}/topical-chat-fact-only.jsonl:0.04", "--data", f"{data}/sugar-statement.jsonl:1",
        "--init", f"{d}/b-1", "--lr", "2e-05", "--seed", "14", "--max-steps", "300", "--precision", "auto",
        "--out", f"{d}/b-2",
    ]  # fmt: skip
    assert argv_of(plan, "soup") == [
        "interpolate", "--run", f"{d}/open-2", "--with", f"{d}/b-2:0.5", "--alpha", "1", "--alphas", "1",
        "--out", f"{d}/soup",
    ]  # fmt: skip
    distilled = argv_of(plan, "distilled")
    assert "--stop-at" not in distilled and "--max-steps" not in distilled  # the full planned schedule
    assert distilled[distilled.index("--init") + 1] == f"{d}/soup"
    assert [distilled[i + 1] for i, a in enumerate(distilled) if a == "--teacher"] == [
        f"{d}/open-2:0.5", f"{d}/b-2:0.5"]  # fmt: skip
    for flag, value in [("--distill-weight", "0.7"), ("--batch-lists", "16"), ("--lr", "4e-05"),
                        ("--dev-lists", "100")]:  # fmt: skip
        assert distilled[distilled.index(flag) + 1] == value
    assert "stopped at step 461" in RECIPE_2_8_0.read_text()
    export = " ".join(argv_of(plan, "bundle"))
    assert export.startswith(f"export --run {d}/distilled --out {d}/bundle ")
    assert (
        "--threshold-on sugar,topical-chat --calibrate-on sugar --last-turn-weight 0.5 --prior-weight 0.2 "
        "--dev-lists 400"
    ) in export
    assert " ".join(argv_of(plan, "eval-test")) == (
        f"evaluate --model {d}/bundle --split test --lists sugar={d}/data/sugar.jsonl "
        f"--lists topical-chat={d}/data/topical-chat.jsonl --max-lists 600 --out {d}/bundle/eval-test.json"
    )
    assert " ".join(argv_of(plan, "eval-ddpp")) == (
        f"evaluate --model {d}/bundle --split all --lists dailydialog-pp={d}/data/dailydialog-pp.jsonl "
        f"--out {d}/bundle/eval-ddpp.json"
    )
    assert " ".join(argv_of(plan, "eval-sugar")) == (
        f"evaluate-sugar --model {d}/bundle --data ../shared/data/sugar/sugar.jsonl --split test "
        f"--out-md {d}/bundle/eval-sugar-settings.md"
    )
    assert argv_of(plan, "card") == ["card", f"{d}/bundle"]
    text = RECIPE_2_8_0.read_text()
    assert "git show" not in text and "recover" not in text


def test_the_2_9_0_recipe_trains_on_top_of_2_8_0_and_exports_on_another_int8_grid(tmp_path):
    """2.9.0 starts from 2.8.0's graph (from git, not models/, which holds 2.9.0 itself) and must not
    ship 2.8.0's symmetric int8 grid, which rounds the stage's moves back."""
    plan = Plan(fake_repo(tmp_path, RECIPE_2_9_0.read_text()))
    recipe = plan.recipe
    assert (recipe.name, recipe.version) == ("dialogue-minilm-l6", "2.9.0")
    assert "git archive model-2.8.0 models/dialogue-minilm-l6" in RECIPE_2_9_0.read_text()
    assert all(s.runs_on == "cpu" for s in recipe.stages)
    trains = [s for s in recipe.stages if s.kind == "train"]
    assert [s.seed for s in trains] == [14, 15]
    assert {s.init_bundle for s in trains} == {"runs/dialogue-minilm-l6-2.8.0"}
    assert "sugar-flip.jsonl:4" in trains[0].data and "tc-short-positive.jsonl:1" in trains[0].data
    assert recipe.data["tc-short-positive.jsonl"].drop_negatives == "short,nearby"
    export = " ".join(argv_of(plan, "bundle"))
    assert "--run runs/dialogue-minilm-l6-2.9.0/short-s14 " in export and "--version 2.9.0 " in export
    assert "--variants int8_blockwise_asymmetric " in export and "models/" not in export
    assert "--last-turn-weight 0.5" in export and "--prior-weight 0.2" in export


def test_the_2_10_0_recipe_is_2_9_0_s_stage_with_the_written_situations_in_its_mix(tmp_path):
    """2.10.0 converts the project's written situated requests and trains 2.9.0's stage with them."""
    plan = Plan(fake_repo(tmp_path, RECIPE_2_10_0.read_text()))
    recipe = plan.recipe
    assert (recipe.name, recipe.version) == ("dialogue-minilm-l6", "2.10.0")
    written = recipe.data["written.jsonl"]
    assert written.dataset == "written-situations"
    assert written.source == "data/written_situations/situations.toml"
    trains = [s for s in recipe.stages if s.kind == "train"]
    assert [s.seed for s in trains] == [14, 15]
    assert {s.init_bundle for s in trains} == {"runs/dialogue-minilm-l6-2.8.0"}
    old = Plan(fake_repo(tmp_path / "old", RECIPE_2_9_0.read_text())).recipe
    before = [s for s in old.stages if s.kind == "train"]
    assert trains[0].data == [*before[0].data, "written.jsonl:30"]  # 2.9.0's mix, plus the written lists
    export = " ".join(argv_of(plan, "bundle"))
    assert "--run runs/dialogue-minilm-l6-2.10.0/written-s14 " in export and "--version 2.10.0 " in export
    assert "--variants int8_blockwise_asymmetric " in export and "models/" not in export


def test_the_2_11_19_recipe_trains_on_2_10_0_and_moves_the_run_back_toward_it(tmp_path):
    """2.11.19 reads 2.10.0 where it stays (runs/model-2.10.0), never the shipped folder it replaced."""
    plan = Plan(fake_repo(tmp_path, RECIPE_2_11_19.read_text()))
    recipe = plan.recipe
    assert (recipe.name, recipe.version) == ("dialogue-minilm-l6", "2.11.19")
    assert "models/dialogue-minilm-l6" not in " ".join(" ".join(argv_of(plan, s.name)) for s in recipe.stages)
    train = next(s for s in recipe.stages if s.kind == "train")
    assert train.init_bundle == "runs/model-2.10.0" and train.teacher_bundles == ["runs/model-2.10.0:1"]
    assert {"persona-chat.jsonl:0.5", "sgd-train.jsonl:1.5", "taskmaster.jsonl:0.5"} <= set(train.data)
    soup = " ".join(argv_of(plan, "wise"))
    assert "--toward-bundle runs/model-2.10.0 --alpha 0.35 " in soup
    export = " ".join(argv_of(plan, "bundle"))
    assert "--run runs/dialogue-minilm-l6-2.11.19/wise " in export and "--version 2.11.19 " in export
    assert "--variants fp16_weights " in export and "--calibrate-on sugar " in export
    # The threshold is 2.10.0's operating point, kept rather than chosen again.
    assert "--threshold-from runs/model-2.10.0 " in export and "--threshold-on" not in export
    kept = 'threshold_from = "runs/model-2.10.0"'
    both = RECIPE_2_11_19.read_text().replace(kept, kept + '\nthreshold_on = ["sugar"]')
    assert "threshold_from keeps a threshold and threshold_on chooses one" in bad(both)
    empty = RECIPE_2_11_19.read_text().replace(kept, 'threshold_from = " "')
    assert "threshold_from names a bundle folder" in bad(empty)


def test_the_cpu_recipe_runs_on_cpu_within_the_hour():
    plan = Plan(CPU)
    recipe = plan.recipe
    assert (recipe.name, recipe.version) == ("dialogue-minilm-l6-cpu", "2.8.0-cpu")
    assert plan.out == REPO / "runs" / "dialogue-minilm-l6-cpu"
    assert all(s.runs_on == "cpu" for s in recipe.stages)
    assert sum(s.minutes_cpu or 0 for s in recipe.stages) <= 60
    trains = [s for s in recipe.stages if s.kind == "train"]
    assert [s.precision for s in trains] == ["auto", "auto"]
    assert trains[0].data == ["sugar.jsonl:1", "topical-chat.jsonl:0.04"] and trains[1].init == trains[0].name
    export = " ".join(argv_of(plan, "bundle"))
    assert "--out runs/dialogue-minilm-l6-cpu/bundle " in export and "models/" not in export
    assert "--variants int8_blockwise" in export and "--prior-weight 0 " in f"{export} "
    assert "--last-turn-weight 0.5" in export and "--dev-lists" not in export


# -- validation --


def bad(text: str) -> str:
    with pytest.raises(RecipeError) as e:
        parse_recipe(text, "recipes/bad.toml")
    return str(e.value)


def test_a_bad_field_is_named_with_its_stage_and_the_file():
    message = bad(TINY.replace("lr = 2e-5", 'lr = "fast"'))
    assert "recipes/bad.toml" in message and "stages[1] (two).lr" in message

    message = bad(TINY.replace('kind = "train"\ninit', 'kind = "train"\nmax_step = 3\ninit'))
    assert "stages[1] (two).max_step" in message and "Extra inputs are not permitted" in message
    assert "stages[0] (one).runs_on" in bad(TINY.replace('name = "one"', 'name = "one"\nruns_on = "tpu"'))
    assert "stages[0] (one).kind" in bad(TINY.replace('kind = "train"', 'kind = "fit"', 1))
    assert "stages[0] (one).data" in bad(
        TINY.replace('data = ["a.jsonl:2", "mine/lists.jsonl"]', "data = []")
    )
    assert "data.a.jsonl.dataset" in bad(TINY.replace('dataset = "sugar"', 'dataset = "reddit"'))
    assert "version" in bad(TINY.replace('version = "1"\n', ""))
    assert "not valid TOML" in bad(TINY + "\n[[stages]\n")


def test_references_must_name_earlier_stages_of_the_right_kind():
    assert "stages[1] (two).init: 'zero' is not an earlier stage" in bad(
        TINY.replace('init = "one"', 'init = "zero"')
    )
    assert "name 'one' is used by an earlier stage" in bad(TINY.replace('name = "two"', 'name = "one"'))
    assert "reserved" in bad(TINY.replace('name = "two"', 'name = "data"'))
    soup = TINY + '\n[[stages]]\nname = "s"\nkind = "soup"\nruns = ["one:0.5", "two:0.4"]\n'
    assert "sum to 0.9, not 1" in bad(soup)
    card = TINY + '\n[[stages]]\nname = "c"\nkind = "card"\n'
    assert "no export stage before it" in bad(card)
    export = TINY + '\n[[stages]]\nname = "e"\nkind = "export"\nrun = "one"\n'
    assert "stage 'e' is a export, not a train or soup" in bad(
        export + '\n[[stages]]\nname = "f"\nkind = "train"\ndata = ["a.jsonl"]\ninit = "e"\n'
    )
    assert "distill_on need teachers" in bad(TINY.replace("lr = 2e-5", "distill_weight = 0.5"))
    assert "need teachers or teacher_bundles" in bad(TINY.replace("lr = 2e-5", 'distill_on = ["a.jsonl"]'))
    assert "distill_on: 'b.jsonl' is not one of this stage's data entries" in bad(
        TINY.replace("lr = 2e-5", 'teacher_bundles = ["models/x:1"]\ndistill_on = ["b.jsonl"]')
    )
    assert "the teachers' share must be between 0 and 1" in bad(
        TINY.replace("lr = 2e-5", 'teacher_bundles = ["models/x:1"]\ndistill_on = ["a.jsonl:1.2"]')
    )
    assert "a teacher is 'NAME:WEIGHT'" in bad(TINY.replace("lr = 2e-5", 'teacher_bundles = ["models/x"]'))
    assert "init and init_bundle exclude each other" in bad(
        TINY.replace('init = "one"', 'init = "one"\ninit_bundle = "models/x"')
    )
    topical = TINY.replace('"sugar", source = "src/sugar.jsonl"', '"topical-chat", source = "t"')
    grouped = topical.replace('source = "t"', 'source = "t", group_by = "request"')
    assert "group_by is for dataset 'sugar'" in bad(grouped)
    on_sugar = 'source = "src/sugar.jsonl"'
    assert "reply_max_words and drop_negatives are for dataset 'topical-chat'" in bad(
        TINY.replace(on_sugar, f"{on_sugar}, reply_max_words = 12")
    )
    assert "retriever is for datasets topical-chat, sgd, persona-chat, taskmaster" in bad(
        TINY.replace(on_sugar, f'{on_sugar}, retriever = "models/x/retriever"')
    )
    assert "max_dialogues is for dataset 'sgd'" in bad(
        TINY.replace(on_sugar, f"{on_sugar}, max_dialogues = 9")
    )
    assert "paraphrases is for datasets sgd, persona-chat, taskmaster" in bad(
        TINY.replace(on_sugar, f'{on_sugar}, paraphrases = "right"')
    )


def test_a_dialogue_set_converts_with_its_retriever_sample_statement_variants_and_paraphrases(tmp_path):
    sgd = TINY.replace(
        '"sugar", source = "src/sugar.jsonl"',
        '"sgd", source = "src/sugar.jsonl", retriever = "models/x/retriever", max_dialogues = 50, '
        'statement_variants = "dropped,irrelevant", paraphrases = "right"',
    )
    plan = Plan(fake_repo(tmp_path, sgd))
    argv = next(argv for step in plan.steps for _, argv in step.commands if argv[:2] == ["convert", "sgd"])
    assert argv[-8:] == [
        "--retriever",
        "models/x/retriever",
        "--max-dialogues",
        "50",
        "--statement-variants",
        "dropped,irrelevant",
        "--paraphrases",
        "right",
    ]


def test_a_users_own_file_plugs_in_by_path_and_a_missing_one_is_refused_before_anything_runs(tmp_path):
    recipe = fake_repo(tmp_path, TINY)
    plan = Plan(recipe)
    assert argv_of(plan, "one")[:5] == [
        "train",
        "--data",
        "runs/tiny/data/a.jsonl:2",
        "--data",
        "mine/lists.jsonl",
    ]
    (recipe.parent.parent / "mine" / "lists.jsonl").unlink()
    with pytest.raises(RecipeError, match=r"stage one: mine/lists.jsonl .* does not exist"):
        Runner(plan, stdout=io.StringIO()).run()
    assert not plan.out.exists()


def test_the_command_line_reports_a_bad_recipe_with_status_2(tmp_path, capsys):
    path = tmp_path / "r.toml"
    path.write_text(TINY.replace("lr = 2e-5", "lr = -1"))
    with pytest.raises(SystemExit) as e:
        cli.main(["show", str(path)])
    assert e.value.code == 2
    assert "stages[1] (two).lr: Input should be greater than 0" in capsys.readouterr().err


# -- GPU stages --


def test_the_2_8_0_recipe_is_refused_without_a_cuda_gpu_before_anything_runs(tmp_path, capsys, monkeypatch):
    from dialogue_ranker.recipes import runner

    monkeypatch.setattr(runner, "cuda_available", lambda: False)
    recipe = fake_repo(tmp_path, RECIPE_2_8_0.read_text())
    with pytest.raises(SystemExit) as e:
        cli.main(["run", str(recipe)])
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert "stage open-1: 7,927 steps, 347 s on an NVIDIA H200, 5-7 hours on 2 CPU cores" in err
    assert "stage distilled: 527 steps" in err and "--allow-slow" in err
    assert not (recipe.parent.parent / "runs").exists()  # nothing ran, not even the conversions


def test_cuda_is_looked_for_only_when_a_gpu_stage_is_pending(tmp_path):
    def no_torch_please() -> bool:
        raise AssertionError("torch was asked about CUDA")

    plan = Plan(fake_repo(tmp_path, RECIPE_2_8_0.read_text()))
    runner = Runner(plan, stdout=io.StringIO(), cuda=no_torch_please)
    mark_done(plan, "distilled")  # both GPU stages done: only CPU stages are pending
    assert runner.refusals(runner.pending(), allow_slow=False) == []
    cpu = Plan(fake_repo(tmp_path / "cpu", CPU.read_text()))
    assert Runner(cpu, cuda=no_torch_please).refusals(Runner(cpu).pending(), allow_slow=False) == []

    runner = Runner(plan, stdout=io.StringIO(), cuda=lambda: False)
    assert runner.refusals(runner.pending("open-1"), allow_slow=True) == []
    assert [r.split(":")[0] for r in runner.refusals(runner.pending("open-1"), allow_slow=False)] == [
        "stage open-1", "stage distilled"]  # fmt: skip
    assert Runner(plan, cuda=lambda: True).refusals(runner.pending("open-1"), allow_slow=False) == []


# -- status, resume --


def test_show_says_which_stages_are_done_and_why_the_others_are_pending(tmp_path, capsys):
    plan = Plan(fake_repo(tmp_path, RECIPE_2_8_0.read_text()))
    mark_done(plan, "b-2")
    (plan.out / "b-2" / MARKER).write_text(json.dumps({"config_hash": "stale", "seconds": 3}))
    (plan.out / "open-1").mkdir()  # interrupted: a folder, no marker
    mark = plan.steps[4]
    assert mark.name == "open-2"
    (plan.out / "open-2").mkdir()
    (plan.out / "open-2" / MARKER).write_text(json.dumps({"config_hash": mark.config_hash}))

    cli.main(["show", str(plan.path)])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[3:]}
    assert rows["data"].split()[:3] == ["data", "convert", "cpu"] and "done (1 s" in rows["data"]
    assert "done (1 s" in rows["b-1"]
    assert "pending (its config changed since it ran)" in rows["b-2"]
    assert "gpu" in rows["open-1"] and "pending (interrupted" in rows["open-1"]
    assert "pending (an earlier stage runs again)" in rows["open-2"]
    assert rows["card"].endswith("pending")


def test_from_reruns_a_stage_only_when_the_ones_before_it_are_done(tmp_path):
    plan = Plan(fake_repo(tmp_path, RECIPE_2_8_0.read_text()))
    runner = Runner(plan, stdout=io.StringIO())
    with pytest.raises(RecipeError, match="earlier stages are not done: data, b-1"):
        runner.pending("b-2")
    with pytest.raises(RecipeError, match="--from nope: no such stage"):
        runner.pending("nope")
    mark_done(plan, "card")
    assert runner.pending() == []
    assert [s.name for s in runner.pending("eval-sugar")] == ["eval-sugar", "card"]


def test_a_changed_stage_changes_its_hash_and_an_estimate_does_not(tmp_path):
    def hashes(text, folder):
        return {s.name: s.config_hash for s in Plan(fake_repo(tmp_path / folder, text)).steps}

    base = hashes(TINY, "base")
    faster = hashes(TINY.replace("lr = 2e-5", "lr = 3e-5"), "lr")
    assert faster["two"] != base["two"] and {**faster, "two": base["two"]} == base
    assert hashes(TINY.replace("lr = 2e-5", "lr = 2e-5\nminutes_cpu = 9\nnote = 'x'"), "estimate") == base


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path):
    plan = Plan(fake_repo(tmp_path, TINY))
    out = io.StringIO()
    assert Runner(plan, stdout=out).run(dry_run=True) == 0
    text = out.getvalue()
    assert "[run] data (convert, cpu)" in text
    assert "ranker convert sugar src/sugar.jsonl runs/tiny/data/.partial/a.jsonl" in text
    assert (
        "ranker train --data runs/tiny/data/a.jsonl --init runs/tiny/one --lr 2e-05 --out runs/tiny/two"
        in text
    )
    assert not plan.out.exists()


def test_a_topical_chat_conversion_passes_its_filters_and_retriever_to_ranker_convert(tmp_path):
    options = 'source = "src/sugar.jsonl", negatives = "fact:1,retrieved:1", reply_max_words = 12, '
    options += 'drop_negatives = "nearby", retriever = "models/m/retriever"'
    text = TINY.replace('"sugar", source = "src/sugar.jsonl"', f'"topical-chat", {options}')
    out = io.StringIO()
    assert Runner(Plan(fake_repo(tmp_path, text)), stdout=out).run(dry_run=True) == 0
    assert (
        "--negatives fact:1,retrieved:1 --reply-max-words 12 --drop-negatives nearby "
        "--retriever models/m/retriever"
    ) in out.getvalue()


def test_a_shipped_model_teaches_on_the_data_entries_named(tmp_path):
    taught = 'teacher_bundles = ["models/m:1"]\ndistill_on = ["a.jsonl"]\ndistill_weight = 0.5'
    text = TINY.replace("lr = 2e-5", f"lr = 2e-5\n{taught}")
    text = text.replace('data = ["a.jsonl"]', 'data = ["a.jsonl", "mine/lists.jsonl"]')
    argv = argv_of(Plan(fake_repo(tmp_path, text)), "two")
    # The bundle is passed as it is written; the entry is named as ranker train names its file.
    assert argv[argv.index("--teacher") + 1] == "models/m:1"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--distill-on"] == ["a"]
    assert argv[argv.index("--distill-weight") + 1] == "0.5"
    # A share per entry travels as ranker train's NAME:SHARE.
    shared = text.replace('distill_on = ["a.jsonl"]', 'distill_on = ["a.jsonl:0.85", "mine/lists.jsonl"]')
    argv = argv_of(Plan(fake_repo(tmp_path / "shared", shared)), "two")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--distill-on"] == ["a:0.85", "lists"]


def test_the_2_11_20_recipe_reads_2_11_19_back_as_a_run_and_moves_it_toward_2_10_0(tmp_path):
    """A train stage of no step turns a bundle into a run; the soup then walks the line between bundles."""
    plan = Plan(fake_repo(tmp_path, RECIPE_2_11_20.read_text()))
    assert plan.recipe.version == "2.11.20"
    start = " ".join(argv_of(plan, "from-2.11.19"))
    assert "--init-bundle runs/model-2.11.19 " in start and "--max-steps 0 " in start
    assert "--teacher" not in start
    soup = " ".join(argv_of(plan, "wise"))
    assert "--run runs/dialogue-minilm-l6-2.11.20/from-2.11.19 " in soup
    assert "--toward-bundle runs/model-2.10.0 --alpha 0.4 " in soup
    export = " ".join(argv_of(plan, "bundle"))
    assert "--variants fp16_weights " in export and "--threshold-from runs/model-2.10.0 " in export
    # No step from a fresh backbone is a fresh, untrained run: refused, as is a negative count.
    stage = '\n[[stages]]\nname = "s"\nkind = "train"\ndata = ["a.jsonl"]\nmax_steps = {}\n'
    assert "it needs init_bundle" in bad(TINY + stage.format(0))
    assert "stages[2] (s).max_steps" in bad(TINY + stage.format(-1))
    read_back = parse_recipe(TINY + stage.format(0) + 'init_bundle = "models/m"\n', "recipes/ok.toml")
    assert read_back.stages[-1].max_steps == 0


def test_the_2_11_21_recipe_trains_fp32_on_labels_alone_and_moves_half_back(tmp_path):
    """Seed 24's 100 fp32 steps from 2.10.0 (no teacher, no bf16 CPU needed), then alpha 0.5 toward it."""
    plan = Plan(fake_repo(tmp_path, RECIPE_2_11_21.read_text()))
    assert plan.recipe.version == "2.11.21"
    train = " ".join(argv_of(plan, "dialogue-s24"))
    assert "--init-bundle runs/model-2.10.0 " in train and "--teacher" not in train
    for flag in ("--seed 24 ", "--max-steps 100 ", "--precision fp32 ", "--dev-lists 20 "):
        assert flag in train
    assert "--data runs/dialogue-minilm-l6-2.11.21/data/sgd-train.jsonl:1.5 " in train
    soup = " ".join(argv_of(plan, "wise"))
    assert "--run runs/dialogue-minilm-l6-2.11.21/dialogue-s24 " in soup
    assert "--toward-bundle runs/model-2.10.0 --alpha 0.5 " in soup
    export = " ".join(argv_of(plan, "bundle"))
    assert "--run runs/dialogue-minilm-l6-2.11.21/wise " in export and "--version 2.11.21 " in export
    # Every SUGAR dev list fits the map: the soup scores only the train stage's 20 a file.
    assert "--dev-lists 400" in export and "--calibrate-on sugar " in export
    assert "--threshold-from runs/model-2.10.0 " in export


def test_a_soup_of_one_run_moves_it_back_toward_the_bundle_it_began_at(tmp_path):
    soup = '\n[[stages]]\nname = "s"\nkind = "soup"\nruns = ["two:1"]\n'
    toward = soup + 'toward_bundle = "models/m"\nalpha = 0.6\n'
    argv = argv_of(Plan(fake_repo(tmp_path, TINY + toward)), "s")
    d = "runs/tiny"
    assert argv == [
        "interpolate", "--run", f"{d}/two", "--toward-bundle", "models/m",
        "--alpha", "0.6", "--alphas", "0.6", "--out", f"{d}/s",
    ]  # fmt: skip
    # One run with nothing to move toward, or all the way at it, is a copy: refused.
    assert "one run averages with nothing" in bad(TINY + soup)
    assert "one run averages with nothing" in bad(TINY + soup + 'toward_bundle = "models/m"\n')
    assert "stages[2] (s).toward_bundle" in bad(TINY + soup + 'toward_bundle = ""\nalpha = 0.6\n')


def test_a_train_stage_passes_its_attention_dropout_and_refuses_one_that_is_not_a_probability(tmp_path):
    argv = argv_of(
        Plan(fake_repo(tmp_path, TINY.replace("lr = 2e-5", "lr = 2e-5\nattention_dropout = 0.0"))), "two"
    )
    assert argv[argv.index("--attention-dropout") + 1] == "0"
    assert "--attention-dropout" not in argv_of(Plan(fake_repo(tmp_path / "default", TINY)), "two")
    with pytest.raises(RecipeError, match="attention_dropout"):
        Plan(fake_repo(tmp_path / "bad", TINY.replace("lr = 2e-5", "lr = 2e-5\nattention_dropout = 1.0")))


def test_an_interrupted_train_stage_resumes_from_its_checkpoint_unless_its_input_ran_again(tmp_path):
    plan = Plan(fake_repo(tmp_path, TINY))
    mark_done(plan, "data")
    calls: list[tuple[str, list[str], bool]] = []

    def call(interrupt: str | None):
        def fake(self, step, label, argv, log_path):
            folder = plan.out / step.name
            calls.append((step.name, argv, (folder / "checkpoints" / "step-00000100.pt").is_file()))
            if step.name == interrupt:  # killed after its first checkpoint
                (folder / "checkpoints").mkdir()
                (folder / "checkpoints" / "step-00000100.pt").write_bytes(b"weights")
                raise StageFailed("killed")
            return 1.0

        return fake

    def run(interrupt: str | None = None) -> int:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Runner, "_call", call(interrupt))
            return Runner(plan, stdout=io.StringIO()).run()

    assert run(interrupt="one") == 1
    assert dict((s.name, status) for s, status in plan.statuses())["one"] == (
        "pending (interrupted: resumes from its last checkpoint)"
    )
    calls.clear()
    assert run() == 0
    assert [(name, argv[-1], kept) for name, argv, kept in calls] == [
        ("one", "--resume", True),  # its folder and checkpoint kept, the same command plus --resume
        ("two", argv_of(plan, "two")[-1], False),
    ]
    log = (plan.out / "recipe.log").read_text()
    assert "resume one: from its last checkpoint" in log

    # Stage two interrupted, then stage one runs again (its marker gone): two's input may differ.
    (plan.out / "two" / MARKER).unlink()
    assert run(interrupt="two") == 1
    shutil.rmtree(plan.out / "one")
    calls.clear()
    assert run() == 0
    assert [(name, kept) for name, _, kept in calls] == [("one", False), ("two", False)]
    assert "--resume" not in calls[1][1]

    # Interrupted under another config of its own: removed first, started over.
    (plan.out / "two" / MARKER).unlink()
    (plan.out / "two" / "checkpoints").mkdir()
    (plan.out / "two" / "checkpoints" / "step-00000100.pt").write_bytes(b"weights")
    (plan.out / "two" / ".stage-started.json").write_text(json.dumps({"config_hash": "another config"}))
    calls.clear()
    assert run() == 0
    assert calls == [("two", argv_of(plan, "two"), False)]
