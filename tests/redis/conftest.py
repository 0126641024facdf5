import os
import shutil

import pytest

from servers import STRATA_BIN, start_redis, start_strata


def need(binary):
    if shutil.which(binary) is None and not os.path.exists(binary):
        pytest.skip(f"{binary} not found (apt-get install redis-server redis-tools)")


@pytest.fixture(scope="module")
def redis_server():
    need("redis-server")
    s = start_redis()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def strata_server():
    if not os.path.exists(STRATA_BIN):
        pytest.fail(f"{STRATA_BIN} not found: build it (cargo build --release -p strata-cli) "
                    "or point STRATA_BIN at it")
    s = start_strata()
    try:
        yield s
    finally:
        # A server that does not stop on SIGTERM has a stuck worker: that is a failure.
        assert s.stop(), "strata serve did not stop within 10 s of SIGTERM"
