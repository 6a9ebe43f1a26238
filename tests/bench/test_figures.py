"""`zoo report` over unchanged results touches no file: a chart drawn twice gives the same bytes, with no
matplotlib version or date in them, and an unchanged PNG is not written again."""

import pytest

from zoo.bench import figures

plt = pytest.importorskip("matplotlib.pyplot")


def _chart():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.barh([0, 1], [40.0, 100.0])
    ax.set_title("v01, v02")
    return fig


def test_a_chart_saved_twice_is_written_once_and_carries_no_version(tmp_path):
    path = tmp_path / "plots" / "chart.png"
    fig = _chart()
    assert figures.save(fig, path, dpi=50)  # new
    first, stamp = path.read_bytes(), path.stat().st_mtime_ns
    assert not figures.save(_chart(), path, dpi=50)  # drawn again: the same bytes, the file left alone
    assert path.read_bytes() == first and path.stat().st_mtime_ns == stamp
    assert b"Software" not in first and b"matplotlib" not in first.lower()
    assert figures.save(fig, path, dpi=60)  # another resolution: other bytes, written
    plt.close("all")
