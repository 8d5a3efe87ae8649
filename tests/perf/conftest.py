"""make perf-check: the checks of how the server's threads are scheduled
(tests/README.md, "make perf-check"). They start servers as the
integration suite does, with its fixtures and apps, and decide on medians
of interleaved rounds (perf.py)."""
import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
INTEGRATION = HERE.parent / "integration"
sys.path.insert(0, str(INTEGRATION))  # its clients and apps (httpclient, loadgen)

_spec = importlib.util.spec_from_file_location("integration_conftest", INTEGRATION / "conftest.py")
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)

# The integration suite's fixtures, the same objects: its servers, its
# harness variables taken out of the environment.
server_factory = _integration.server_factory
_harness_variables_not_passed_on = _integration._harness_variables_not_passed_on
start_server = _integration.start_server
