"""Greedy-output equivalence counted by hand: which pairs are compared, which match, where the first divergence
is, which basis, and that each load level's counts are its own."""

from __future__ import annotations

from spectrn.analyze.equivalence import OutputComparer
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Divergence, Equivalence


def rec(
    variant: str,
    index: int,
    ids: list[int] | None = None,
    *,
    text: str | None = None,
    level: str = "c4",
    error: str | None = None,
    turn: int | None = None,
) -> RequestRecord:
    return RequestRecord(
        variant=variant, index=index, prompt_id=f"p{index}", prompt_class="structured", level=level,
        sent_at=1000.0 + index, ttft=None if error else 0.1, e2e=None if error else 0.5,
        chunk_times=[] if error else [0.1, 0.5], chunk_tokens=[] if error else [1, 3],
        completion_tokens=None if error else 4, status=500 if error else 200, error=error,
        output_token_ids=ids, output_text=text, turn=turn,
    )  # fmt: skip


def compare(records: list[RequestRecord]) -> OutputComparer:
    c = OutputComparer()
    for r in records:
        c.add(r)
    return c


def test_pairs_are_compared_token_by_token_and_the_first_difference_is_named() -> None:
    c = compare([
        rec("baseline", 0, [1, 2, 3]), rec("speculative", 0, [1, 2, 3]),  # match
        rec("speculative", 1, [7, 8, 9]), rec("baseline", 1, [7, 0, 9]),  # differ at position 1 (either order)
        rec("baseline", 2, [4, 5]), rec("speculative", 2, [4, 5, 6]),  # a prefix: differs at the shorter's end, 2
        rec("baseline", 3, [1]),  # no partner: not compared
        rec("draft", 3, [1]),  # not a variant that is compared
        rec("baseline", 4, [1]), rec("speculative", 4, [1], error="http_500"),  # a failure is not an output
    ])  # fmt: skip
    assert c.result("c4") == Equivalence(
        compared=3, matched=1, match_rate=1 / 3, basis="token_ids",
        divergences=[Divergence(level="c4", index=1, prompt_id="p1", first_divergence=1),
                     Divergence(level="c4", index=2, prompt_id="p2", first_divergence=2)],
    )  # fmt: skip


def test_a_repeated_record_of_one_variant_waits_for_the_other_variant() -> None:
    # the same request of the baseline twice (a retry): never compared with itself, the later one is kept
    c = compare([rec("baseline", 0, [1, 2]), rec("baseline", 0, [1, 2]), rec("speculative", 0, [1, 3])])
    assert (c.result("c4").compared, c.result("c4").matched) == (1, 0)


def test_texts_are_compared_only_with_texts() -> None:
    c = compare([
        rec("baseline", 0, text="abc"), rec("speculative", 0, text="abd"),  # texts: differ at character 2
        rec("baseline", 1, [1, 2]), rec("speculative", 1, text="xy"),  # ids against text: not compared
    ])  # fmt: skip
    assert c.result("c4") == Equivalence(
        compared=1, matched=0, match_rate=0.0, basis="text",
        divergences=[Divergence(level="c4", index=0, prompt_id="p0", first_divergence=2)],
    )  # fmt: skip


def test_later_turns_of_a_conversation_pair_with_their_own_turn() -> None:
    c = compare([
        rec("baseline", 0, [1], turn=1), rec("baseline", 0, [2], turn=2),
        rec("speculative", 0, [2], turn=2), rec("speculative", 0, [1], turn=1),
    ])  # fmt: skip
    assert (c.result("c4").compared, c.result("c4").matched) == (2, 2)


def test_warm_up_requests_are_not_measured() -> None:
    warm = [r.model_copy(update={"warmup": True}) for r in (rec("baseline", 9, [1]), rec("speculative", 9, [2]))]
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    s = summarize([*warm, rec("baseline", 0, [1]), rec("speculative", 0, [1])], meta)
    (level,) = s.levels
    assert level.variants["baseline"].requests.completed == 1
    assert level.equivalence == Equivalence(compared=1, matched=1, match_rate=1.0, basis="token_ids", divergences=[])


def test_each_load_levels_equivalence_counts_its_own_requests() -> None:
    # a real defect once: every level reported the run's totals, so a level whose outputs all matched
    # showed the other level's divergence as its own ("1 of 2 differ ... first at index ?")
    records = [
        rec("baseline", 0, [1, 2], level="c1"), rec("speculative", 0, [1, 2], level="c1"),
        rec("baseline", 1, [3, 4], level="c1"), rec("speculative", 1, [3, 4], level="c1"),
        rec("baseline", 0, [1, 2], level="c4"), rec("speculative", 0, [1, 9], level="c4"),
    ]  # fmt: skip
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    s = summarize(records, meta)
    by = {lv.load.label: lv.equivalence for lv in s.levels}
    assert by["c1"] == Equivalence(compared=2, matched=2, match_rate=1.0, basis="token_ids", divergences=[])
    assert by["c4"] == Equivalence(
        compared=1, matched=0, match_rate=0.0, basis="token_ids",
        divergences=[Divergence(level="c4", index=0, prompt_id="p0", first_divergence=1)],
    )  # fmt: skip
    assert [(f.level, f.message) for f in s.findings if f.code == "divergence"] == [
        ("c4", "OUTPUT DIVERGENCE: 1 of 1 greedy outputs differ between baseline and speculative (first at index 0)")
    ]
