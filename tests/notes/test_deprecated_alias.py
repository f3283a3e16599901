"""`hebbs.vault` was the notes indexer's name; it stays an alias of `hebbs.notes` that warns."""

import warnings

import pytest



@pytest.mark.parametrize("old, new", [("index_vault", "index_notes"), ("watch_vault", "watch_notes"),
                                      ("list_vault", "list_notes"), ("VaultWatcher", "NotesWatcher"),
                                      ("parse_note", "parse_note")])
def test_the_old_names_still_work_and_warn(old, new):
    import hebbs.vault

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(hebbs.vault, old) is getattr(hebbs.notes, new)
    assert any(issubclass(w.category, DeprecationWarning) and f"hebbs.notes.{new}" in str(w.message) for w in caught)


def test_a_name_that_never_existed_is_an_attribute_error():
    import hebbs.vault

    with pytest.raises(AttributeError):
        hebbs.vault.no_such_name  # noqa: B018 - the lookup is what raises
