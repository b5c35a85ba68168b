use proptest::prelude::*;

use super::*;

fn line(queue: &mut WriteQueue, text: &str, request: Option<i64>) -> Ticket {
    queue
        .push(request, |bytes| {
            bytes.extend_from_slice(text.as_bytes());
            Ok(())
        })
        .expect("queued")
}

fn taken(turn: io::Result<Turn>) -> Batch {
    match turn.expect("no failure") {
        Turn::Write(batch) => batch,
        Turn::Done => panic!("nothing to write"),
    }
}

#[test]
fn a_turn_takes_every_line_up_to_the_last_and_later_turns_find_them_written() {
    let mut queue = WriteQueue::default();
    let a = line(&mut queue, "a", None);
    let b = line(&mut queue, "bb", Some(7));
    let batch = taken(queue.turn(b));
    assert_eq!(batch.bytes, b"a\nbb\n");
    // Taken: no longer withdrawable, and its writer is the one that took it.
    assert!(!queue.withdraw(a));
    assert!(!queue.withdraw_request(7));
    queue.written(batch);
    assert_eq!(queue.turn(a).expect("ok"), Turn::Done);
    assert_eq!(queue.turn(b).expect("ok"), Turn::Done);
    // The buffer is reused for the next batch.
    let c = line(&mut queue, "c", None);
    assert_eq!(taken(queue.turn(c)).bytes, b"c\n");
}

#[test]
fn a_withdrawn_line_is_never_written_and_the_others_are_kept_whole() {
    let mut queue = WriteQueue::default();
    let a = line(&mut queue, "first", None);
    let b = line(&mut queue, "second", Some(2));
    let c = line(&mut queue, "third", None);
    assert!(queue.withdraw(b));
    assert!(!queue.withdraw(b), "once");
    assert_eq!(queue.turn(b).expect("ok"), Turn::Done, "nothing to write");
    assert!(!queue.withdraw_request(2), "withdrawn already");
    let d = line(&mut queue, "fourth", Some(4));
    assert!(queue.withdraw_request(4));
    assert!(queue.withdraw(a));
    assert_eq!(taken(queue.turn(c)).bytes, b"third\n");
    assert_eq!(queue.queued_bytes(), 0);
    let _ = d;
}

#[test]
fn after_a_failure_nothing_is_queued_or_written_and_written_lines_stay_written() {
    let mut queue = WriteQueue::default();
    let a = line(&mut queue, "a", None);
    let batch = taken(queue.turn(a));
    queue.written(batch);
    let b = line(&mut queue, "b", None);
    let batch = taken(queue.turn(b));
    queue.fail(io::ErrorKind::BrokenPipe);
    drop(batch);
    assert_eq!(queue.turn(a).expect("written before"), Turn::Done);
    assert_eq!(
        queue.turn(b).expect_err("failed").kind(),
        io::ErrorKind::BrokenPipe
    );
    let refused = queue.push(None, |_| Ok(())).expect_err("failed");
    assert_eq!(refused.kind(), io::ErrorKind::BrokenPipe);
}

#[test]
fn a_closed_queue_refuses_lines_and_drops_those_queued() {
    let mut queue = WriteQueue::default();
    let a = line(&mut queue, "a", None);
    queue.close();
    assert!(queue.is_closed());
    assert_eq!(queue.queued_bytes(), 0);
    let error = queue.turn(a).expect_err("closed");
    assert_eq!(error.kind(), io::ErrorKind::NotConnected);
    assert!(queue.push(None, |_| Ok(())).is_err());
}

#[test]
fn a_line_that_fails_to_encode_leaves_nothing_behind() {
    let mut queue = WriteQueue::default();
    let a = line(&mut queue, "a", None);
    let failed = queue.push(None, |bytes| {
        bytes.extend_from_slice(b"half");
        Err(io::Error::other("no"))
    });
    assert!(failed.is_err());
    assert_eq!(taken(queue.turn(a)).bytes, b"a\n");
}

#[test]
fn large_buffers_are_given_back() {
    let mut queue = WriteQueue::default();
    let big = "x".repeat(2 * KEPT_CAPACITY);
    let a = line(&mut queue, &big, None);
    assert!(queue.withdraw(a));
    assert_eq!(queue.bytes.capacity(), 0, "withdrawn: given back");
    let b = line(&mut queue, &big, None);
    let batch = taken(queue.turn(b));
    queue.written(batch);
    assert_eq!(queue.spare.capacity(), 0, "written: not kept");
}

/// What a test does to the queue.
#[derive(Debug, Clone)]
enum Step {
    /// Queue a line of this length.
    Push(usize),
    /// The caller of the n-th line pushed so far (modulo) gives up: it withdraws its line.
    Withdraw(usize),
    /// The caller of the n-th line gets the pipe: it writes its batch, if any.
    Write(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1usize..40).prop_map(Step::Push),
        any::<usize>().prop_map(Step::Withdraw),
        any::<usize>().prop_map(Step::Write),
    ]
}

proptest! {
    /// Whatever callers do, the bytes written are exactly the lines not withdrawn, each whole,
    /// in order; a withdrawal succeeds exactly when no write has taken the line.
    #[test]
    fn written_bytes_are_the_lines_not_withdrawn_whole_and_in_order(steps in prop::collection::vec(step(), 1..80)) {
        let mut queue = WriteQueue::default();
        let mut pushed: Vec<(Ticket, Vec<u8>)> = Vec::new();
        let mut taken_up_to = 0;
        let mut withdrawn = std::collections::BTreeSet::new();
        let mut wire = Vec::new();
        for step in steps {
            match step {
                Step::Push(len) => {
                    let n = pushed.len();
                    let text: Vec<u8> = (0..len).map(|i| b'a' + ((n + i) % 26) as u8).collect();
                    let ticket = queue.push(Some(n as i64), |bytes| {
                        bytes.extend_from_slice(&text);
                        Ok(())
                    }).expect("queued");
                    pushed.push((ticket, text));
                }
                Step::Withdraw(n) if !pushed.is_empty() => {
                    let n = n % pushed.len();
                    let expected = n >= taken_up_to && !withdrawn.contains(&n);
                    prop_assert_eq!(queue.withdraw(pushed[n].0), expected);
                    if expected {
                        withdrawn.insert(n);
                    }
                }
                Step::Write(n) if !pushed.is_empty() => {
                    let n = n % pushed.len();
                    match queue.turn(pushed[n].0).expect("no failure") {
                        Turn::Write(batch) => {
                            prop_assert!(n >= taken_up_to && !withdrawn.contains(&n));
                            wire.extend_from_slice(&batch.bytes);
                            taken_up_to = pushed.len();
                            queue.written(batch);
                        }
                        Turn::Done => prop_assert!(n < taken_up_to || withdrawn.contains(&n)),
                    }
                }
                _ => {}
            }
        }
        let expected: Vec<u8> = pushed[..taken_up_to]
            .iter()
            .enumerate()
            .filter(|(n, _)| !withdrawn.contains(n))
            .flat_map(|(_, (_, text))| text.iter().copied().chain([b'\n']))
            .collect();
        prop_assert_eq!(wire, expected);
    }
}
