"""The devices a cluster offers, read from its workers' reports as the sidebar shows them."""

from core.cluster.devices import offered


def test_platforms_are_listed_in_order_with_what_they_are_and_where():
    workers = {
        "tls://a": {"served": ["gpu", "cpu"], "kinds": {"gpu": "NVIDIA H100 x1", "cpu": "cpu x16"}, "host": "node-a",
                    "pid": 11},
        "tls://b": {"served": ["cpu"], "kinds": {"cpu": "cpu x2"}, "host": "node-b", "pid": 12},
    }
    found = offered(workers)
    assert found.available == ("cpu", "gpu")
    assert found.kinds == {"cpu": "cpu x16, cpu x2 on node-a, node-b", "gpu": "NVIDIA H100 x1 on node-a"}
    assert found.missing == {"tpu": "no worker of the cluster has one"}
    assert found.workers == 2


def test_a_worker_that_cannot_answer_offers_nothing_but_is_counted():
    found = offered({"tls://a": "timed out", "tls://b": {"served": ["cpu"], "host": "h", "pid": 3}})
    assert found.available == ("cpu",)
    assert found.kinds == {"cpu": "cpu on h"}  # no description: the platform's name
    assert found.workers == 2


def test_no_worker_yet_says_so_for_every_platform():
    found = offered({})
    assert found.available == () and found.workers == 0
    assert set(found.missing.values()) == {"no worker has joined the cluster yet"}
    assert set(found.missing) == {"cpu", "gpu", "tpu"}


def test_a_platform_outside_the_known_devices_is_not_offered():
    found = offered({"w": {"served": ["metal"], "host": "h", "pid": 1}})
    assert found.available == () and "metal" not in found.kinds
    assert set(found.missing) == {"cpu", "gpu", "tpu"}
