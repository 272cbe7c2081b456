"""Which launches take a backend's general `launch` and which its fast path
(`Backend.fast_launcher`): for the fast-launch tests of every backend."""


def count_general_launches(backend, monkeypatch) -> list:
    """The ndranges of the launches that go through `backend.launch`, the general path."""
    ndranges = []
    general = backend.launch

    def launch(prepared, args, ndrange, workgroupsize):
        ndranges.append(ndrange)
        general(prepared, args, ndrange, workgroupsize)

    monkeypatch.setattr(backend, "launch", launch)
    return ndranges
