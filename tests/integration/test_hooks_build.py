"""The test hooks are in test builds only: the fault hooks read from the
environment (CSERVE_FAULT_SUBMIT, CSERVE_TEST_FAIL_POOL_THREAD) are compiled
into a TEST_HOOKS=1 build and nowhere else, so a release ./cserve neither
reads them nor holds their names, and says a variable of that name is no
option's, as of any other. Read from the binaries' bytes: no server runs."""
import os
import subprocess

import pytest

from conftest import APPS, BIN, HOOK_VARIABLES, HOOKS_BIN, ROOT, hook_variables_in

# make integration-test: ./cserve and build-hooks/cserve. A sanitizer or
# free-threaded run names one binary, a test build, that is both.
RELEASE = pytest.mark.skipif(os.path.realpath(BIN) == os.path.realpath(HOOKS_BIN),
                             reason="the binary under test is the hooks binary (a test build)")


def check_config(binary, var):
    """--check-config with var=1 in the environment (it starts nothing)."""
    return subprocess.run([binary, "--check-config", "--chdir", str(APPS), "wsgi_apps:application"],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=30, env=dict(os.environ, **{var: "1"}))


@RELEASE
def test_the_release_binary_holds_no_hook_variable():
    assert hook_variables_in(BIN) == [], f"{BIN} holds the test hooks' variables"


def test_the_hooks_binary_holds_every_hook_variable(hooks_bin):
    assert hook_variables_in(hooks_bin) == list(HOOK_VARIABLES)


@RELEASE
@pytest.mark.parametrize("var", HOOK_VARIABLES)
def test_the_release_binary_warns_that_a_hook_variable_is_no_options(var):
    r = check_config(BIN, var)
    assert r.returncode == 0, r.stderr
    assert f"{var} is no option's variable" in r.stderr, r.stderr


@pytest.mark.parametrize("var", HOOK_VARIABLES)
def test_the_hooks_binary_reads_a_hook_variable_without_a_warning(hooks_bin, var):
    r = check_config(hooks_bin, var)
    assert r.returncode == 0, r.stderr
    assert var not in r.stderr, r.stderr
