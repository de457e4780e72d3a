"""SGLang's default CUDA-graph capture list and the size a decode batch is padded to."""

from sglang_physics import default_capture_sizes, padded_rows


def test_the_default_list_is_sglangs_since_0_5():
    sizes = default_capture_sizes(512)
    assert sizes[:7] == [1, 2, 4, 8, 12, 16, 24]
    assert 256 in sizes and 264 not in sizes and 272 in sizes and 512 in sizes
    assert default_capture_sizes(600)[-2:] == [576, 600]  # 0.5.17+ appends --cuda-graph-max-bs
    assert default_capture_sizes(600, append_max_bs=False)[-1] == 576


def test_a_batch_runs_the_next_captured_size_or_eagerly_above_them_all():
    sizes = default_capture_sizes(48)
    assert padded_rows(5, sizes) == 8 and padded_rows(12, sizes) == 12
    assert padded_rows(41, sizes) == 48
    assert padded_rows(49, sizes) == 0
