"""A crash's last exception line, said as a class: the catalogue first, then the generic
families no SGLang release printed (other frameworks' OOMs, capture failures with any cause,
toolchain and driver errors, Python's programming errors)."""

import pytest
from sglang_tuner.sources.log.messages.exceptions import (
    UNCLASSIFIED,
    diagnose,
    final_exception,
    is_exception_line,
)

FLAG = "--mem-fraction-static."


@pytest.mark.parametrize(
    ("line", "cls", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "crash", "oom"),
        ("tvm.error.InternalError: CUDA out of memory", "crash", "oom"),
        ("RuntimeError: Triton Error [CUDA]: out of memory", "crash", "oom"),
        ("RuntimeError: flashinfer: CUDA out of memory", "crash", "oom"),
        ("Exception: Capture cuda graph failed: RuntimeError: x", "crash", "capture_failure"),
        (
            "RuntimeError: CUDA error: operation not permitted when stream is capturing",
            "crash",
            "capture_failure",
        ),
        (
            "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'",
            "not_tuning",
            "toolchain",
        ),
        ("RuntimeError: NCCL error: unhandled system error", "not_tuning", "driver"),
        ("ZeroDivisionError: division by zero", "not_tuning", "software"),
        ("KeyError: 'model.layers.55.mlp.gate_up_proj.input_scale'", "not_tuning", "software"),
        (
            "AttributeError: 'ModelConfig' object has no attribute 'scaling'",
            "not_tuning",
            "software",
        ),
        ("NotImplementedError", "not_tuning", "software"),
        ("AssertionError", "not_tuning", "software"),
        (
            "builtins.TypeError: forward() got an unexpected keyword argument 'x'",
            "not_tuning",
            "software",
        ),
        # a state, not wrong code: SGLang and torch raise these for what they met
        ("ValueError: the prompt is longer than the model's context", UNCLASSIFIED, ""),
        ("RuntimeError: shape '[4, 8]' is invalid for input of size 30", UNCLASSIFIED, ""),
        # the first exception a line names is its own: a message quoting a KeyError is not one
        ("RuntimeError: worker failed with KeyError: 'a'", UNCLASSIFIED, ""),
        # an OOM that an assert reports is an OOM
        ("AssertionError: CUDA out of memory", "crash", "oom"),
        ("Killed", "not_tuning", "killed"),
        ("Out of memory: Killed process 4121 (python3)", "not_tuning", "killed"),  # host RAM
        ("Segmentation fault (core dumped)", "not_tuning", "native"),
        ("Fatal Python error: Aborted", "not_tuning", "native"),
        (
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "not_tuning",
            "driver",
        ),
    ],
)
def test_generic_families_name_what_no_release_printed(line: str, cls: str, kind: str) -> None:
    said = diagnose(line)
    assert (said.cls, said.kind) == (cls, kind), said


def test_a_catalogued_message_says_its_source_and_versions() -> None:
    said = diagnose("RuntimeError: Not enough memory. Please try to increase " + FLAG)
    assert (said.cls, said.kind) == ("crash", "startup_not_enough_memory")
    assert said.phase == "pool_sizing"
    assert said.rule.startswith("catalogue: raise in srt/model_executor/")


def test_a_catalogued_crash_that_holds_an_oom_is_an_oom() -> None:
    said = diagnose("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate")
    assert said.kind == "oom" and said.rule == "fallback: oom"


def test_a_capture_failure_whose_cause_is_the_toolchain_is_not_a_tuning_problem() -> None:
    said = diagnose(
        "Exception: Capture cuda graph failed: Internal Triton PTX codegen error: ptxas fatal : "
        "Value 'sm_120' is not defined for option 'gpu-name'"
    )
    assert (said.cls, said.kind, said.phase) == ("not_tuning", "toolchain", "capture")
    assert said.rule.endswith("; cause: toolchain")


def test_a_bare_exception_name_is_an_exception_line_whatever_ends_the_line() -> None:
    for end in ("", "\r", " ", "\r\n"):
        assert is_exception_line("NotImplementedError" + end)
    assert not is_exception_line("    raise NotImplementedError")


def test_the_final_exception_of_a_traceback_pasted_on_one_line() -> None:
    line = (
        'Traceback (most recent call last):   File "/sgl/srt/model_executor/cuda_graph_runner.py",'
        " line 300, in capture     self.capture_one_batch_size(bs, forward)   "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"
    )
    assert final_exception(line).startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert final_exception("nothing here") == ""


def test_exception_lines_are_told_from_code_and_prose() -> None:
    assert is_exception_line("ValueError: bad")
    assert is_exception_line("  torch.distributed.DistBackendError: NCCL error")
    assert is_exception_line("Exception: Capture cuda graph failed:")
    assert not is_exception_line("    raise ValueError(msg)")
    assert not is_exception_line("the error: was here")
