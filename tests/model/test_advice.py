"""What a piece of advice carries: the flags one change sets, companions included."""

from sglang_tuner.model.advice import ITL_P99, TTFT_P99, Action, Prediction


def test_action_flags_are_the_restarts_command_line_delta_with_companions():
    graphs = Action("--cuda-graph-max-bs 160 -> 256", "--cuda-graph-max-bs", "160", "256")
    memory = Action("--mem-fraction-static 0.89 -> 0.87", "--mem-fraction-static", "0.89", "0.87")
    both = Action(graphs.text, graphs.flag, graphs.current, graphs.suggested, companions=(memory,))
    assert both.flags() == {"--cuda-graph-max-bs": "256", "--mem-fraction-static": "0.87"}


def test_action_flags_leave_out_instructions_and_unknown_values():
    assert Action("client: submit requests faster").flags() == {}
    assert Action("--mem-fraction-static: raise by 0.05", "--mem-fraction-static").flags() == {}


def test_an_itl_p99_rise_past_half_again_is_a_cost_said_first():
    effects = {ITL_P99: (0.6, 0.4, 0.8), "tok/s": (0.3, 0.2, 0.4)}
    p = Prediction("TTFT p99", 0.4, 0.3, 0.5, "a larger pool", effects)
    assert p.costs() == {ITL_P99: 0.6}
    assert p.text() == "-40 % TTFT p99 (-50 to -30 %), trades ITL p99 +60 %: a larger pool"
    within = Prediction("TTFT p99", 0.4, 0.3, 0.5, "", {ITL_P99: (0.4, 0.3, 0.5)})
    assert within.costs() == {}


def test_a_queue_left_growing_is_a_cost_with_no_figure():
    p = Prediction("ITL p50", 0.5, 0.4, 0.6, "capped", unbounded=(TTFT_P99,))
    assert TTFT_P99 not in p.effects
    assert p.text() == "-50 % ITL p50 (-60 to -40 %), trades TTFT p99 unbounded: capped"
