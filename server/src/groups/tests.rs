//! The coordinator's state machine driven through its public operations, on an injected clock.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{Coordinator, GroupConfig, GroupState, Join, Reply};

fn join(group: &str, member: &str, instance: Option<&str>) -> Join {
    Join {
        group_id: group.into(),
        member_id: member.into(),
        instance_id: instance.map(Into::into),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(10),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: true,
    }
}

fn coordinator() -> Coordinator {
    Coordinator::new(GroupConfig {
        initial_rebalance_delay: Duration::from_millis(0),
        ..GroupConfig::default()
    })
}

fn now_value<T: std::fmt::Debug>(reply: Reply<T>) -> T {
    match reply {
        Reply::Now(v) => v,
        Reply::Later(mut rx) => rx.try_recv().expect("answered"),
    }
}

#[test]
fn two_members_join_sync_and_rebalance_when_one_leaves() {
    let c = coordinator();
    let t = Instant::now();
    let first = now_value(c.join(join("g", "", None), t));
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    let a = first.member_id;
    let Reply::Later(mut rx_a) = c.join(join("g", &a, None), t) else {
        panic!()
    };
    // The initial delay of 0 passes at the next tick.
    c.tick(t, |_| false);
    let joined_a = rx_a.try_recv().unwrap();
    assert_eq!((joined_a.error, joined_a.generation), (None, 1));
    assert_eq!(joined_a.leader, a);
    assert_eq!(joined_a.members.len(), 1);
    let synced = now_value(c.sync(
        "g",
        1,
        &a,
        None,
        vec![(a.clone(), Bytes::from_static(b"p0"))],
        t,
    ));
    assert_eq!(synced.assignment, Bytes::from_static(b"p0"));

    // A second member: the first must rejoin (heartbeat says so), then both get gen 2.
    let b = now_value(c.join(join("g", "", None), t)).member_id;
    let Reply::Later(mut rx_b) = c.join(join("g", &b, None), t) else {
        panic!()
    };
    assert_eq!(
        c.heartbeat("g", 1, &a, None, t),
        Err(ResponseError::RebalanceInProgress)
    );
    let Reply::Later(mut rx_a) = c.join(join("g", &a, None), t) else {
        panic!()
    };
    let (ja, jb) = (rx_a.try_recv().unwrap(), rx_b.try_recv().unwrap());
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(ja.leader, a, "the leader stays");
    assert!(jb.members.is_empty());
    let Reply::Later(mut sync_b) = c.sync("g", 2, &b, None, vec![], t) else {
        panic!()
    };
    let assignments = vec![
        (a.clone(), Bytes::from_static(b"p0")),
        (b.clone(), Bytes::from_static(b"p1")),
    ];
    assert_eq!(
        now_value(c.sync("g", 2, &a, None, assignments, t)).assignment,
        Bytes::from_static(b"p0")
    );
    assert_eq!(
        sync_b.try_recv().unwrap().assignment,
        Bytes::from_static(b"p1")
    );
    assert_eq!(
        c.heartbeat("g", 1, &b, None, t),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(c.heartbeat("g", 2, &b, None, t), Ok(()));

    // b's session expires: a rebalance, a alone in gen 3.
    let later = t + Duration::from_secs(11);
    assert_eq!(c.heartbeat("g", 2, &a, None, later), Ok(()));
    c.tick(later, |_| false);
    assert_eq!(
        c.describe("g").unwrap().state,
        GroupState::PreparingRebalance
    );
    let Reply::Later(mut rx_a) = c.join(join("g", &a, None), later) else {
        panic!()
    };
    assert_eq!(rx_a.try_recv().unwrap().generation, 3);
    assert_eq!(c.leave("g", &[(a.clone(), None)], later), Ok(vec![Ok(())]));
    assert_eq!(c.describe("g").unwrap().state, GroupState::Empty);
}

#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    let c = coordinator();
    let t = Instant::now();
    let Reply::Later(mut rx) = c.join(join("s", "", Some("host-1")), t) else {
        panic!()
    };
    c.tick(t, |_| false);
    let joined = rx.try_recv().unwrap();
    let old = joined.member_id.clone();
    now_value(c.sync(
        "s",
        joined.generation,
        &old,
        None,
        vec![(old.clone(), Bytes::from_static(b"all"))],
        t,
    ));
    // Restart: a new JoinGroup with no member id but the same instance id.
    let again = now_value(c.join(join("s", "", Some("host-1")), t));
    assert_eq!(again.error, None);
    assert_eq!(again.generation, joined.generation, "no rebalance");
    assert_ne!(again.member_id, old);
    let synced = now_value(c.sync("s", again.generation, &again.member_id, None, vec![], t));
    assert_eq!(synced.assignment, Bytes::from_static(b"all"));
    assert_eq!(
        c.heartbeat("s", again.generation, &old, None, t),
        Err(ResponseError::UnknownMemberId)
    );
}

#[test]
fn bad_joins_get_kafka_errors() {
    let c = coordinator();
    let t = Instant::now();
    let mut short = join("g", "", None);
    short.session_timeout = Duration::from_millis(10);
    assert_eq!(
        now_value(c.join(short, t)).error,
        Some(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        now_value(c.join(join("", "", None), t)).error,
        Some(ResponseError::InvalidGroupId)
    );
    assert_eq!(
        now_value(c.join(join("nope", "ghost", None), t)).error,
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn a_leader_that_rejoins_before_syncing_gets_the_members_again() {
    let c = coordinator();
    let t = Instant::now();
    let Reply::Later(mut rx) = c.join(join("g", "", Some("i")), t) else {
        panic!()
    };
    c.tick(t, |_| false);
    let joined = rx.try_recv().unwrap();
    assert_eq!(joined.members.len(), 1);
    // The leader's response got lost; it sends the same JoinGroup again.
    let again = now_value(c.join(join("g", &joined.member_id, Some("i")), t));
    assert_eq!(
        (again.generation, again.members.len()),
        (joined.generation, 1)
    );
}

#[test]
fn a_joiner_that_gave_up_does_not_hold_the_group_forever() {
    let c = coordinator();
    let t = Instant::now();
    let a = now_value(c.join(join("g", "", None), t)).member_id;
    let Reply::Later(rx_a) = c.join(join("g", &a, None), t) else {
        panic!()
    };
    // Its JoinGroup times out client-side: the receiver is dropped.
    drop(rx_a);
    let b = now_value(c.join(join("g", "", None), t)).member_id;
    let Reply::Later(mut rx_b) = c.join(join("g", &b, None), t) else {
        panic!()
    };
    let later = t + Duration::from_secs(11);
    c.tick(later, |_| false);
    // a's session ran out; b forms the group alone.
    let joined = rx_b.try_recv().unwrap();
    assert_eq!(joined.leader, b);
    assert_eq!(joined.members.len(), 1);
}

#[test]
fn a_second_process_with_the_same_instance_id_fences_the_first() {
    let c = coordinator();
    let t = Instant::now();
    let Reply::Later(mut rx) = c.join(join("g", "", Some("i")), t) else {
        panic!()
    };
    c.tick(t, |_| false);
    let first = rx.try_recv().unwrap();
    now_value(c.sync(
        "g",
        first.generation,
        &first.member_id,
        Some("i"),
        vec![],
        t,
    ));
    let second = now_value(c.join(join("g", "", Some("i")), t));
    assert_eq!(second.error, None);
    let fenced = ResponseError::FencedInstanceId;
    assert_eq!(
        c.heartbeat("g", first.generation, &first.member_id, Some("i"), t),
        Err(fenced)
    );
    assert_eq!(
        now_value(c.join(join("g", &first.member_id, Some("i")), t)).error,
        Some(fenced)
    );
    assert_eq!(
        c.heartbeat("g", second.generation, &second.member_id, Some("i"), t),
        Ok(())
    );
}

#[test]
fn unanswered_member_ids_and_empty_groups_are_forgotten() {
    let c = coordinator();
    let t = Instant::now();
    for i in 0..50 {
        now_value(c.join(join(&format!("g{i}"), "", None), t));
    }
    assert_eq!(c.list().len(), 50);
    c.tick(t + Duration::from_secs(11), |_| false);
    assert!(c.list().is_empty());
}

#[test]
fn groups_hold_at_most_group_max_size_members_pending_ids_included() {
    let c = Coordinator::new(GroupConfig {
        initial_rebalance_delay: Duration::from_millis(0),
        max_size: 2,
        ..GroupConfig::default()
    });
    let t = Instant::now();
    let a = now_value(c.join(join("g", "", None), t));
    assert_eq!(a.error, Some(ResponseError::MemberIdRequired));
    let b = now_value(c.join(join("g", "", None), t));
    assert_eq!(b.error, Some(ResponseError::MemberIdRequired));
    let full = now_value(c.join(join("g", "", None), t));
    assert_eq!(full.error, Some(ResponseError::GroupMaxSizeReached));
    // A pending id joining with its id is not a new member: it may come in.
    let Reply::Later(_rx) = c.join(join("g", &a.member_id, None), t) else {
        panic!("the pending member joins")
    };
    // Still full: one member, one pending id.
    let full = now_value(c.join(join("g", "", Some("static-1")), t));
    assert_eq!(full.error, Some(ResponseError::GroupMaxSizeReached));
    // The pending id lapses after its session timeout: room for one more.
    c.tick(t + Duration::from_secs(11), |_| false);
    let late = now_value(c.join(join("g", "", None), t + Duration::from_secs(11)));
    assert_eq!(late.error, Some(ResponseError::MemberIdRequired));
    // Other groups are not affected.
    let other = now_value(c.join(join("h", "", None), t));
    assert_eq!(other.error, Some(ResponseError::MemberIdRequired));
}

/// One member joins `group` and becomes the leader of the next generation; its member id.
fn join_alone(c: &Coordinator, group: &str, t: Instant) -> String {
    let id = now_value(c.join(join(group, "", None), t)).member_id;
    let Reply::Later(mut rx) = c.join(join(group, &id, None), t) else {
        panic!("waits for the join barrier")
    };
    c.tick(t, |_| false);
    assert_eq!(rx.try_recv().unwrap().error, None);
    id
}

#[test]
fn an_emptied_group_with_offsets_keeps_its_type_and_generation_and_its_record_follows() {
    let c = coordinator();
    let t = Instant::now();
    let a = join_alone(&c, "kept", t);
    let b = join_alone(&c, "forgotten", t);
    let written = c.unpersisted();
    assert_eq!(written.len(), 2, "{written:?}");
    assert!(c.unpersisted().is_empty(), "written once");
    // A write that failed: its groups are taken again, unchanged.
    c.unwritten(&["kept".to_string(), "no-such-group".to_string()]);
    let again = c.unpersisted();
    assert_eq!(
        again,
        written
            .iter()
            .filter(|(id, _)| id == "kept")
            .cloned()
            .collect::<Vec<_>>()
    );
    assert!(c.unpersisted().is_empty(), "written once");
    c.leave("kept", &[(a, None)], t).unwrap();
    c.leave("forgotten", &[(b, None)], t).unwrap();
    // "kept" has offsets, "forgotten" none: only the latter goes, with its record.
    let forgotten = c.tick(t, |g| g == "kept");
    assert_eq!(forgotten, vec!["forgotten".to_string()]);
    let kept: Vec<_> = c
        .list()
        .into_iter()
        .map(|(id, kind, _)| (id, kind))
        .collect();
    assert_eq!(kept, vec![("kept".to_string(), "consumer".to_string())]);
    let written = c.unpersisted();
    assert_eq!(written.len(), 1);
    assert_eq!(
        (written[0].0.as_str(), written[0].1.generation),
        ("kept", 2)
    );
    join_alone(&c, "kept", t);
    assert_eq!(c.membership("kept", "", None).unwrap().unwrap().1, 3);

    // After a restart, a group is back from its record, Empty, and keeps counting.
    let restarted = coordinator();
    restarted.restore(c.unpersisted(), t);
    assert!(
        restarted.unpersisted().is_empty(),
        "restored from what is written"
    );
    let d = &restarted.describe("kept").unwrap();
    assert_eq!(
        (d.state, d.protocol_type.as_str()),
        (GroupState::Empty, "consumer")
    );
    join_alone(&restarted, "kept", t);
    assert_eq!(
        restarted.membership("kept", "", None).unwrap().unwrap().1,
        4
    );
}

#[test]
fn a_stable_group_is_back_after_a_restart_with_its_members_and_their_assignments() {
    let c = coordinator();
    let t = Instant::now();
    let a = join_alone(&c, "g", t);
    // While it rebalances its record has its generation only.
    let rebalancing = c.unpersisted();
    assert!(rebalancing[0].1.members.is_empty(), "{rebalancing:?}");
    let synced = now_value(c.sync(
        "g",
        1,
        &a,
        None,
        vec![(a.clone(), Bytes::from_static(b"p0"))],
        t,
    ));
    assert_eq!(synced.error, None);
    let stable = c.unpersisted();
    assert_eq!(stable.len(), 1);
    let meta = &stable[0].1;
    assert_eq!(
        (
            meta.generation,
            meta.protocol.as_deref(),
            meta.leader.as_deref()
        ),
        (1, Some("range"), Some(a.as_str()))
    );
    assert_eq!(meta.members[0].assignment, b"p0");

    let restarted = coordinator();
    restarted.restore(stable, t);
    assert!(restarted.unpersisted().is_empty(), "restored as written");
    let d = restarted.describe("g").unwrap();
    assert_eq!((d.state, d.members.len()), (GroupState::Stable, 1));
    assert_eq!(d.members[0].assignment, Bytes::from_static(b"p0"));
    // The member goes on at its generation: no rebalance.
    assert_eq!(restarted.heartbeat("g", 1, &a, None, t), Ok(()));
    // Its session runs from the restart.
    restarted.tick(t + Duration::from_secs(11), |_| false);
    assert_eq!(
        restarted.heartbeat("g", 1, &a, None, t + Duration::from_secs(11)),
        Err(ResponseError::UnknownMemberId)
    );
}
