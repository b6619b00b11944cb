import pytest

from optima_pipelines.errors import InvalidInput, UnknownCabinet
from optima_pipelines.warehouse import cabinets as repo
from optima_pipelines.warehouse.secrets import TokenCipher, load_key

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzIjozMjc2OCwic2lkIjoiY2FiLTEifQ.c2lnbmF0dXJl"


@pytest.fixture
def cipher(settings):
    return TokenCipher(load_key(settings))


def test_add_list_and_status(warehouse_conn, cipher):
    repo.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop One", TOKEN)
    repo.add_cabinet(warehouse_conn, cipher, "shop-2", "Shop Two", None, status="paused")
    listed = repo.list_cabinets(warehouse_conn)
    assert [(c.id, c.status, c.has_token) for c in listed] == [("shop-1", "active", True), ("shop-2", "paused", False)]
    assert [c.id for c in repo.list_cabinets(warehouse_conn, status="active")] == ["shop-1"]
    assert repo.set_status(warehouse_conn, "shop-2", "active").active


def test_token_is_encrypted_at_rest_and_round_trips(warehouse_conn, cipher):
    repo.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop One", TOKEN)
    raw = warehouse_conn.execute("SELECT wb_token_encrypted::text, row_to_json(c)::text FROM cabinets c").fetchone()
    assert TOKEN not in raw[0] and TOKEN not in raw[1]
    assert repo.get_token(warehouse_conn, cipher, "shop-1") == TOKEN
    assert TOKEN not in repr(repo.get_cabinet(warehouse_conn, "shop-1"))


def test_rotate_key_reencrypts_every_token(warehouse_conn, cipher):
    from cryptography.fernet import Fernet

    repo.add_cabinet(warehouse_conn, cipher, "a", "A", TOKEN)
    repo.add_cabinet(warehouse_conn, cipher, "b", "B", TOKEN + "x")
    new = TokenCipher(Fernet.generate_key())
    assert repo.rotate_key(warehouse_conn, cipher, new) == 2
    assert repo.get_token(warehouse_conn, new, "b") == TOKEN + "x"


@pytest.mark.parametrize("bad_id", ["", "a|b", "a,b", "a[1]", "-lead", "x" * 65, "with space"])
def test_bad_cabinet_ids_are_rejected_before_the_database(warehouse_conn, cipher, bad_id):
    with pytest.raises(InvalidInput, match="invalid cabinet id"):
        repo.add_cabinet(warehouse_conn, cipher, bad_id, "x", None)


def test_unknown_cabinet_and_bad_status_are_named(warehouse_conn, cipher):
    with pytest.raises(UnknownCabinet, match="'ghost' does not exist"):
        repo.set_status(warehouse_conn, "ghost", "active")
    repo.add_cabinet(warehouse_conn, cipher, "a", "A", None)
    with pytest.raises(InvalidInput, match="invalid status 'sleeping'"):
        repo.set_status(warehouse_conn, "a", "sleeping")
    with pytest.raises(InvalidInput, match="already exists"):
        repo.add_cabinet(warehouse_conn, cipher, "a", "A", None)


def test_a_rejected_token_makes_the_cabinet_token_invalid_until_a_new_token(warehouse_conn, cipher):
    repo.add_cabinet(warehouse_conn, cipher, "shop-1", "Shop One", TOKEN)
    assert repo.mark_token_rejected(warehouse_conn, "shop-1", "WB rejected the token (HTTP 401: token expired)")
    assert not repo.mark_token_rejected(warehouse_conn, "shop-1", "again")  # one change, one alert
    cab = repo.get_cabinet(warehouse_conn, "shop-1")
    assert cab.status == "token_invalid" and cab.token_rejected_at is not None
    assert cab.token_rejected_reason == "WB rejected the token (HTTP 401: token expired)"
    assert repo.list_cabinets(warehouse_conn, status="active") == []

    repo.set_token(warehouse_conn, cipher, "shop-1", TOKEN[::-1])
    cab = repo.get_cabinet(warehouse_conn, "shop-1")
    assert (cab.status, cab.token_rejected_at, cab.token_rejected_reason) == ("active", None, None)
    repo.set_status(warehouse_conn, "shop-1", "paused")
    repo.set_token(warehouse_conn, cipher, "shop-1", TOKEN)
    assert repo.get_cabinet(warehouse_conn, "shop-1").status == "paused"  # a person's pause stays
