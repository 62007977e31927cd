import pytest

from scalemodel.errors import BadInput
from scalemodel.units import fmt_bytes, fmt_time, parse_size, parse_tokens


def test_bytes_show_decimal_and_binary():
    assert fmt_bytes(80 * 2**30) == "85.9 GB (80 GiB)"
    assert fmt_bytes(327_680) == "327.7 kB (320 KiB)"


def test_parse_size_units():
    assert parse_size("80GiB") == 80 * 2**30
    assert parse_size("1.5 GB") == 1.5e9
    assert parse_size("4096") == 4096
    with pytest.raises(BadInput):
        parse_size("12 parsecs")


def test_tokens_are_binary_k():
    assert parse_tokens("8k") == 8192
    assert parse_tokens("128k") == 131072
    assert parse_tokens("4096") == 4096
    with pytest.raises(BadInput):
        parse_tokens("1.5")


def test_time():
    assert fmt_time(0.0419) == "41.9 ms"
    assert fmt_time(3 * 86400) == "3 days"
