use super::*;

fn committed(offset: i64) -> Committed {
    Committed {
        offset,
        leader_epoch: -1,
        metadata: Some("m".into()),
        commit_timestamp: 1,
    }
}

#[test]
fn commits_survive_reopen_and_tombstones_delete() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        store
            .commit(
                "g",
                vec![
                    (("t".into(), 0), committed(5)),
                    (("t".into(), 1), committed(7)),
                ],
            )
            .unwrap();
        store
            .commit("g", vec![(("t".into(), 0), committed(9))])
            .unwrap();
        store
            .commit("h", vec![(("t".into(), 0), committed(1))])
            .unwrap();
        assert_eq!(store.delete("h", None).unwrap(), 1);
    }
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    assert_eq!(store.fetch("g", "t", 0), Some(committed(9)));
    assert_eq!(store.fetch("g", "t", 1), Some(committed(7)));
    assert_eq!(store.fetch("h", "t", 0), None);
    assert_eq!(store.groups(), vec!["g".to_string()]);
}

fn meta(generation: i32) -> GroupMeta {
    GroupMeta::of_type("consumer", generation)
}

#[test]
fn group_records_survive_reopen_and_go_with_the_groups_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        store
            .commit("g", vec![(("t".into(), 0), committed(5))])
            .unwrap();
        store
            .store_groups(vec![("g".into(), meta(3)), ("h".into(), meta(1))])
            .unwrap();
        store.store_groups(vec![("g".into(), meta(4))]).unwrap();
        store.delete_group_record("h").unwrap();
        // A group's record is not one of its offsets.
        assert_eq!(store.group_offsets("g").len(), 1);
    }
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        assert_eq!(store.group_metas(), vec![("g".to_string(), meta(4))]);
        assert_eq!(store.fetch("g", "t", 0), Some(committed(5)));
        assert_eq!(store.groups(), vec!["g".to_string()]);
        // Deleting all of a group's offsets (DeleteGroups, expiry) deletes its record too.
        assert_eq!(store.delete("g", None).unwrap(), 1);
        assert!(store.group_metas().is_empty());
    }
    let log = Log::open(dir.path()).unwrap();
    assert!(OffsetStore::open(&log).unwrap().group_metas().is_empty());
}

#[test]
fn a_rewrite_on_start_up_keeps_the_records_of_groups_with_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        for generation in 0..10 {
            store
                .store_groups(vec![("kept".into(), meta(generation))])
                .unwrap();
        }
        // Then 18 MiB of commits of one partition (4 KiB of metadata each): the first
        // 16 MiB segment, with every group record, is closed, for the rewrite to delete.
        let commit = Committed {
            metadata: Some("m".repeat(MAX_METADATA_BYTES)),
            ..committed(1)
        };
        for _ in 0..9 {
            let batch = vec![(("t".to_string(), 0), commit.clone()); 500];
            store.commit("kept", batch).unwrap();
        }
    }
    // The first open rewrites the live records (4510 records for 2 live ones) and deletes
    // the first segment; the second replays what it wrote.
    for _ in 0..2 {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        assert_eq!(store.group_metas(), vec![("kept".to_string(), meta(9))]);
        assert_eq!(store.group_offsets("kept").len(), 1);
    }
    let first = dir.path().join(format!("{TOPIC}-0/{:020}.log", 0));
    assert!(!first.exists(), "the rewrite deleted the first segment");
}

#[test]
fn many_commits_are_compacted_on_start_up() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        for i in 0..3000 {
            store
                .commit("g", vec![(("t".into(), 0), committed(i))])
                .unwrap();
        }
    }
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        assert_eq!(store.fetch("g", "t", 0), Some(committed(2999)));
    }
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    assert_eq!(store.fetch("g", "t", 0), Some(committed(2999)));
}

#[test]
fn offsets_of_groups_empty_for_the_retention_period_expire() {
    let dir = tempfile::tempdir().unwrap();
    let day = 24 * 3600 * 1000;
    let week = 7 * day;
    let commit_at = |ts: i64| Committed {
        commit_timestamp: ts,
        ..committed(1)
    };
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        let t0 = store.opened_ms;
        for (group, ts) in [("idle", t0), ("busy", t0), ("recent", t0 + 5 * day)] {
            store
                .commit(group, vec![(("t".into(), 0), commit_at(ts))])
                .unwrap();
        }
        let members: HashSet<String> = ["busy".to_string()].into();
        // "busy" has members throughout; "idle" last committed at t0, "recent" 5 days later.
        assert!(store.expire(t0 + day, week, &members).unwrap().is_empty());
        assert!(store
            .expire(t0 + week - 1, week, &members)
            .unwrap()
            .is_empty());
        assert_eq!(
            store.expire(t0 + week, week, &members).unwrap(),
            vec!["idle".to_string()]
        );
        assert_eq!(store.fetch("idle", "t", 0), None);
        // "busy" loses its members: its week counts from when it was last seen with them.
        let nobody = HashSet::new();
        assert!(store
            .expire(t0 + 12 * day - 1, week, &nobody)
            .unwrap()
            .is_empty());
        assert_eq!(
            store.expire(t0 + 12 * day, week, &nobody).unwrap(),
            vec!["recent".to_string()]
        );
        assert!(store
            .expire(t0 + 14 * day - 1, week, &nobody)
            .unwrap()
            .is_empty());
        assert_eq!(
            store.expire(t0 + 14 * day, week, &nobody).unwrap(),
            vec!["busy".to_string()]
        );
        assert!(store.groups().is_empty());
    }
    // The expiry was written as tombstones: it survives a restart.
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    assert!(store.groups().is_empty());
}

#[test]
fn a_restart_never_expires_offsets_early() {
    let dir = tempfile::tempdir().unwrap();
    let week = 7 * 24 * 3600 * 1000;
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        // A commit from long ago (a group that had members, but committed nothing since).
        let old = Committed {
            commit_timestamp: store.opened_ms - 30 * week,
            ..committed(1)
        };
        store.commit("g", vec![(("t".into(), 0), old)]).unwrap();
    }
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    let none = HashSet::new();
    assert!(store
        .expire(store.opened_ms + week - 1, week, &none)
        .unwrap()
        .is_empty());
    assert_eq!(
        store.expire(store.opened_ms + week, week, &none).unwrap(),
        vec!["g".to_string()]
    );
}

fn member(epoch: i32, assigned: Vec<StoredPartition>) -> ConsumerMemberRecord {
    ConsumerMemberRecord {
        instance_id: None,
        rack_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 30_000,
        names: vec!["t".into()],
        regex: None,
        topics: vec!["t".into()],
        assignor: None,
        epoch,
        previous_epoch: epoch - 1,
        state: 1,
        target: assigned.clone(),
        assigned,
        revoking: Vec::new(),
        classic: None,
    }
}

fn consumer_write(
    epoch: i32,
    members: &[(&str, ConsumerMemberRecord)],
    all_members: bool,
) -> ConsumerGroupWrite {
    ConsumerGroupWrite {
        epoch,
        target: ConsumerTargetRecord {
            assignment_epoch: epoch,
            assignor: "uniform".into(),
            topics: vec![("t".into(), 7, 2)],
        },
        members: members
            .iter()
            .map(|(id, m)| (id.to_string(), m.clone()))
            .collect(),
        all_members,
    }
}

#[test]
fn consumer_group_members_survive_reopen_and_a_removed_one_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let records_after = |store: &OffsetStore| store.log.partition().log_end_offset();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        let a = member(2, vec![(7, 0)]);
        let b = member(2, vec![(7, 1)]);
        let w = consumer_write(2, &[("a", a.clone()), ("b", b.clone())], true);
        store
            .store_consumer_groups(vec![("g".into(), Some(w.clone()))])
            .unwrap();
        let end = records_after(&store);
        // The same again writes nothing; one member's change writes that member only.
        store
            .store_consumer_groups(vec![("g".into(), Some(w))])
            .unwrap();
        assert_eq!(records_after(&store), end);
        let a3 = member(3, vec![(7, 0), (7, 1)]);
        store
            .store_consumer_groups(vec![(
                "g".into(),
                Some(consumer_write(3, &[("a", a3)], true)),
            )])
            .unwrap();
        // Epoch, target, a's record and b's tombstone.
        assert_eq!(records_after(&store), end + 4);
        // A group without offsets or members is deleted whole.
        store
            .store_consumer_groups(vec![(
                "h".into(),
                Some(consumer_write(1, &[("x", member(1, Vec::new()))], true)),
            )])
            .unwrap();
        store
            .store_consumer_groups(vec![("h".into(), None)])
            .unwrap();
    }
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    let groups = store.consumer_groups();
    assert_eq!(groups.len(), 1, "{groups:?}");
    let (id, image) = &groups[0];
    assert_eq!(id, "g");
    assert_eq!(image.epoch, 3);
    assert_eq!(image.target.as_ref().map(|t| t.assignment_epoch), Some(3));
    assert_eq!(
        image.members.keys().collect::<Vec<_>>(),
        vec!["a"],
        "b's tombstone deleted it"
    );
    assert_eq!(image.members["a"].assigned, vec![(7, 0), (7, 1)]);
}

#[test]
fn a_rewrite_keeps_the_records_of_a_consumer_group_with_members_and_no_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let written = {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        store
            .store_consumer_groups(vec![(
                "g".into(),
                Some(consumer_write(1, &[("a", member(1, vec![(7, 0)]))], true)),
            )])
            .unwrap();
        // Enough overwritten commits of another group to make the next open rewrite.
        for i in 0..1100 {
            store
                .commit("h", vec![(("t".into(), 0), committed(i))])
                .unwrap();
        }
        store.log.partition().log_end_offset()
    };
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    // h's commit and g's three records written again.
    assert_eq!(
        store.log.partition().log_end_offset(),
        written + 4,
        "the open rewrote the live records"
    );
    drop(store);
    let store = OffsetStore::open(&log).unwrap();
    let groups = store.consumer_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].1.members["a"].assigned, vec![(7, 0)]);
    assert_eq!(store.fetch("h", "t", 0), Some(committed(1099)));
}

fn streams_record(epoch: i32, members: &[&str]) -> StreamsGroupRecord {
    use crate::groups::streams::assignor::Tasks;
    use crate::groups::streams::stored::StreamsMemberRecord;
    let tasks = Tasks {
        active: [("0".to_string(), 1)].into(),
        ..Tasks::default()
    };
    StreamsGroupRecord {
        epoch,
        assignment_epoch: epoch,
        topology: None,
        configured: crate::groups::streams::topology::Configured::default(),
        endpoint_epoch: 0,
        standbys: 1,
        shutdown_by: None,
        members: members
            .iter()
            .map(|id| {
                let member = StreamsMemberRecord {
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "/h".into(),
                    rebalance_timeout_ms: 30_000,
                    process_id: "p".into(),
                    endpoint: Some(("localhost".into(), 8080)),
                    client_tags: Vec::new(),
                    topology_epoch: 0,
                    epoch,
                    previous_epoch: epoch - 1,
                    state: 1,
                    assigned: tasks.clone(),
                    revoking: Tasks::default(),
                    target: tasks.clone(),
                };
                (id.to_string(), member)
            })
            .collect(),
    }
}

#[test]
fn a_streams_groups_record_survives_reopen_and_is_written_only_when_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(dir.path()).unwrap();
        let store = OffsetStore::open(&log).unwrap();
        let end = || store.log.partition().log_end_offset();
        store
            .store_streams_groups(vec![("app".into(), Some(streams_record(2, &["m1"])))])
            .unwrap();
        let written = end();
        store
            .store_streams_groups(vec![("app".into(), Some(streams_record(2, &["m1"])))])
            .unwrap();
        assert_eq!(end(), written, "the same record again is not written");
        store
            .store_streams_groups(vec![("app".into(), Some(streams_record(3, &["m1", "m2"])))])
            .unwrap();
        store
            .store_streams_groups(vec![("gone".into(), Some(streams_record(1, &["x"])))])
            .unwrap();
        store
            .store_streams_groups(vec![("gone".into(), None)])
            .unwrap();
    }
    let log = Log::open(dir.path()).unwrap();
    let store = OffsetStore::open(&log).unwrap();
    let groups = store.streams_groups();
    assert_eq!(
        groups,
        vec![("app".to_string(), streams_record(3, &["m1", "m2"]))]
    );
}
