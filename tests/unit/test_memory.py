import platform

import pytest

from dialogue_ranker.serving.memory import limit_malloc_arenas
from dialogue_ranker.serving.settings import Settings


def test_the_server_limits_malloc_arenas_by_default_and_zero_leaves_glibcs_default():
    assert Settings().server.malloc_arenas == 2
    assert limit_malloc_arenas(0) is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_the_arena_limit():
    assert limit_malloc_arenas(2) is True
