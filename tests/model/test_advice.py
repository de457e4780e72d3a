"""What a piece of advice carries: the flags one change sets, companions included."""

from sglang_tuner.model.advice import Action


def test_action_flags_are_the_restarts_command_line_delta_with_companions():
    graphs = Action("--cuda-graph-max-bs 160 -> 256", "--cuda-graph-max-bs", "160", "256")
    memory = Action("--mem-fraction-static 0.89 -> 0.87", "--mem-fraction-static", "0.89", "0.87")
    both = Action(graphs.text, graphs.flag, graphs.current, graphs.suggested, companions=(memory,))
    assert both.flags() == {"--cuda-graph-max-bs": "256", "--mem-fraction-static": "0.87"}


def test_action_flags_leave_out_instructions_and_unknown_values():
    assert Action("client: submit requests faster").flags() == {}
    assert Action("--mem-fraction-static: raise by 0.05", "--mem-fraction-static").flags() == {}
