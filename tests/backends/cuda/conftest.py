"""The host-driver run of the CUDA tests (test_cuda_runtime_host_driver.py) starts as
soon as the suite's tests are collected, in a process of its own, and its test runs
last: the run goes on beside the other tests (on another core), and the test waits for
what is left of it."""
HOST_DRIVER_TEST = "test_the_cuda_tests_on_a_host_memory_driver"


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.name == HOST_DRIVER_TEST)   # stable: only it moves


def pytest_collection_finish(session):
    for item in session.items:
        if item.name == HOST_DRIVER_TEST:
            item.module.start()


def pytest_sessionfinish(session):
    for item in session.items:
        if item.name == HOST_DRIVER_TEST:
            item.module.stop()
