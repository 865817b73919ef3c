#![allow(clippy::unwrap_used)]

use super::*;

fn meta(tenant: &str) -> RecordMeta {
    RecordMeta {
        tenant: tenant.as_bytes().into(),
        timestamp: 1,
        deadline: None,
    }
}

#[test]
fn fairness_keys_parse_and_print() {
    for (text, key) in [
        ("none", FairnessKey::None),
        ("KEY", FairnessKey::Key),
        ("header:Tenant-Id", FairnessKey::Header("Tenant-Id".into())),
    ] {
        assert_eq!(FairnessKey::parse(text), Some(key.clone()));
        assert_eq!(FairnessKey::parse(&key.to_string()), Some(key));
    }
    assert_eq!(FairnessKey::parse("header:"), None);
    assert_eq!(FairnessKey::parse("value"), None);
}

#[test]
fn tenants_are_interned_while_named_and_their_ids_reused() {
    let mut w = Lookahead::new(10);
    w.learn(10, vec![meta("a"), meta("b"), meta("a")]);
    // Known already, and a gap: both ignored.
    w.learn(11, vec![meta("z")]);
    w.learn(20, vec![meta("z")]);
    assert_eq!(w.end(), 13);
    let ids: Vec<u32> = (10..13).map(|o| w.get(o).unwrap().tenant).collect();
    assert_eq!(ids[0], ids[2]);
    assert_ne!(ids[0], ids[1]);
    w.ring.push_back(ids[1]);
    w.start_at(12);
    // "b" is gone: its id is free, out of the ring, and taken by the next newcomer.
    assert!(w.ring.is_empty());
    assert!(w.tenant(ids[1]).is_none());
    w.learn(13, vec![meta("c")]);
    assert_eq!(w.get(13).unwrap().tenant, ids[1]);
    assert_eq!(&**w.tenant(ids[1]).unwrap(), b"c");
    assert_eq!(&**w.tenant(ids[0]).unwrap(), b"a");
    // Past the end: empty from there; before the start: empty and read again.
    w.start_at(50);
    assert_eq!((w.end(), w.tenants.ids.len()), (50, 0));
    w.learn(50, vec![meta("a")]);
    w.start_at(40);
    assert_eq!((w.end(), w.tenants.ids.len()), (40, 0));
}

mod acquisition;
mod cost;
