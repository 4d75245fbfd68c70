//! Requests in flight, kept running until each node has answered or timed out.
//!
//! Two hazards shape this module:
//!
//! - With redis-rs, a request future dropped before its command is written is never sent,
//!   and one dropped after is still executed by the node. A client that decides at a quorum
//!   and drops the stragglers can therefore leak keys, or release before its own `SET`
//!   lands. Requests are never dropped here: when an operation ends (or is cancelled), what
//!   is still in flight moves to a background task that runs it to completion.
//! - A cleanup release must reach a node after the `SET` it cleans up. Each node has a
//!   *lane* ([`Lanes`]): a command starts only once the previous command of the same
//!   resource to that node has finished. The node's connection is ordered, so the node
//!   executes them in order too. (A release behind a lock request unanswered on the
//!   client's own connection is written behind it there at once: that connection keeps
//!   their order itself, see `Gate::followable_on`.)

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::{Instant, Sleep};

use super::background::Background;
use super::direct::{Declined, Direct, goes_direct};
use super::expiry::Expiry;
use super::lanes::{Gate, Lanes, OpensOnDrop};
use super::node::{Nodes, Start};
use redlock_core::{NodeFailure, Reply, RequestId, Timestamp, Transmit};

/// What [`Flight::next_until`] returns: a finished request, or the driver's deadline.
pub(crate) enum Next<T = Completion> {
    Done(T),
    Due,
}

/// A finished request.
pub(crate) struct Completion {
    pub(crate) request: RequestId,
    pub(crate) result: Result<Reply, NodeFailure>,
}

/// One reading of both clocks for every command a pass of a driver sends.
#[derive(Clone, Copy)]
pub(crate) struct Pass {
    /// Where the commands' deadlines run from.
    pub(crate) sent_at: Instant,
    /// The admission's `now`, for a command that waits for nothing before it goes out.
    pub(crate) now: Timestamp,
}

/// How many passes of the runtime's I/O driver [`Flight::linger`] waits for at most.
const LINGER_PASSES: usize = 4;

/// The requests of one operation (acquire, extend or release).
pub(crate) struct Flight {
    nodes: Arc<Nodes>,
    background: Background,
    timeout: Duration,
    lanes: Lanes,
    requests: Requests,
}

/// Requests that are not futures of [`Requests::pending`]: the direct requests
/// (`direct.rs`), whose deadlines the same timer covers.
trait Side<T> {
    /// The next request that has ended, answered or past its deadline once the timer has
    /// `reached` it; registers the task for the next answer.
    fn poll(&mut self, reached: Option<Instant>, cx: &mut Context<'_>) -> Option<T>;
    /// The earliest deadline recorded since the last call.
    fn sooner(&mut self) -> Option<Instant>;
    /// The earliest deadline after `reached`.
    fn earliest_after(&self, reached: Instant) -> Option<Instant>;
    fn len(&self) -> usize;
    /// A request to send again as a request future on `expiry` (made if need be), if any.
    fn resend(&mut self, expiry: &mut Option<Arc<Expiry>>) -> Option<BoxFuture<'static, T>>;
}

// `Self::…` names `Direct`'s own methods, which take precedence over the trait's.
impl Side<Completion> for Direct {
    fn poll(&mut self, reached: Option<Instant>, cx: &mut Context<'_>) -> Option<Completion> {
        Self::poll(self, reached, cx)
    }
    fn sooner(&mut self) -> Option<Instant> {
        Self::sooner(self)
    }
    fn earliest_after(&self, reached: Instant) -> Option<Instant> {
        Self::earliest_after(self, reached)
    }
    fn len(&self) -> usize {
        Self::len(self)
    }
    fn resend(
        &mut self,
        expiry: &mut Option<Arc<Expiry>>,
    ) -> Option<BoxFuture<'static, Completion>> {
        Self::resend(self, expiry)
    }
}

/// No side requests (the timer's own tests).
impl<T> Side<T> for () {
    fn poll(&mut self, _: Option<Instant>, _: &mut Context<'_>) -> Option<T> {
        None
    }
    fn sooner(&mut self) -> Option<Instant> {
        None
    }
    fn earliest_after(&self, _: Instant) -> Option<Instant> {
        None
    }
    fn len(&self) -> usize {
        0
    }
    fn resend(&mut self, _: &mut Option<Arc<Expiry>>) -> Option<BoxFuture<'static, T>> {
        None
    }
}

/// Requests in flight, and the one timer for all their deadlines (see [`Expiry`]).
///
/// The request futures' set and their shared deadlines are made with the first request
/// future: an operation whose requests all go direct (the routine case) allocates neither.
struct Requests<T = Completion, S = Direct> {
    pending: Option<FuturesUnordered<BoxFuture<'static, T>>>,
    expiry: Option<Arc<Expiry>>,
    /// The timer, set at `armed`: never later than the earliest deadline not passed.
    timer: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
    /// How far the timer has reached.
    reached: Option<Instant>,
    side: S,
}

impl<T> Default for Requests<T, ()> {
    fn default() -> Self {
        Self::new(())
    }
}

impl<T, S: Side<T>> Requests<T, S> {
    fn new(side: S) -> Self {
        Self {
            pending: None,
            expiry: None,
            timer: None,
            armed: None,
            reached: None,
            side,
        }
    }

    fn is_empty(&self) -> bool {
        self.futures() == 0 && self.side.len() == 0
    }

    fn len(&self) -> usize {
        self.futures() + self.side.len()
    }

    /// How many request futures are in flight.
    fn futures(&self) -> usize {
        self.pending.as_ref().map_or(0, FuturesUnordered::len)
    }

    /// Adds a request future.
    fn push(&mut self, request: BoxFuture<'static, T>) {
        self.pending
            .get_or_insert_with(FuturesUnordered::new)
            .push(request);
    }

    /// The request futures' shared deadlines (made with the first).
    fn expiry(&mut self) -> &Arc<Expiry> {
        self.expiry.get_or_insert_with(Arc::default)
    }

    /// The next finished request (`None` when none is in flight), with the requests' timer
    /// kept at their earliest deadline.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.poll_until(None, cx).map(|next| match next {
            Some(Next::Done(done)) => Some(done),
            // Not asked for.
            Some(Next::Due) | None => None,
        })
    }

    /// The next finished request, or [`Next::Due`] once the timer has reached `until` (the
    /// driver's own deadline, which so shares the requests' timer); `None` when no request
    /// is in flight and `until` is `None`.
    fn poll_until(
        &mut self,
        until: Option<Instant>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Next<T>>> {
        loop {
            if let Some(done) = self.side.poll(self.reached, cx) {
                return Poll::Ready(Some(Next::Done(done)));
            }
            while let Some(request) = self.side.resend(&mut self.expiry) {
                self.push(request);
            }
            let next = match &mut self.pending {
                Some(pending) => pending.poll_next_unpin(cx),
                None => Poll::Ready(None),
            };
            match next {
                Poll::Ready(Some(done)) => return Poll::Ready(Some(Next::Done(done))),
                Poll::Ready(None) if self.side.len() == 0 && until.is_none() => {
                    return Poll::Ready(None);
                }
                _ => {}
            }
            // The requests due by the time the timer reached are reported first (above), as
            // the driver's own timer once came after them: then its deadline, when passed.
            if let (Some(until), Some(reached)) = (until, self.reached)
                && until <= reached
            {
                return Poll::Ready(Some(Next::Due));
            }
            // Only ever moved earlier: a timer that fires before anything is due costs one
            // more look, where following every finished request to a later deadline would
            // cost a trip to the runtime's timer wheel each time.
            let expiry = self.expiry.as_ref().and_then(|expiry| expiry.sooner());
            for sooner in [expiry, self.side.sooner(), until].into_iter().flatten() {
                self.arm(sooner);
            }
            let (Some(timer), Some(reached)) = (&mut self.timer, self.armed) else {
                return Poll::Pending;
            };
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.armed = None;
            self.reached = Some(self.reached.map_or(reached, |at| at.max(reached)));
            // Wakes the requests now due (the next poll of `pending` ends them; the side's
            // next poll ends its own), and sets the timer for the next deadline.
            let next = [
                self.expiry
                    .as_ref()
                    .and_then(|expiry| expiry.reach(reached)),
                self.side.earliest_after(reached),
            ];
            if let Some(next) = next.into_iter().flatten().min() {
                self.arm(next);
            }
        }
    }

    /// Sets the timer at `at` unless it is set earlier already.
    fn arm(&mut self, at: Instant) {
        if self.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(at),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
        }
        self.armed = Some(at);
    }

    async fn next(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Finishes, without waiting, the requests that have answered; true when none is left.
    ///
    /// Polling with a no-op waker loses no wake-up: `pending` polls each request with a
    /// waker of its own, and only its outer waker, which whoever polls next registers
    /// again, is the no-op one; a straight call's woken flag (`StraightCall`) stays set
    /// until whoever polls next reads it.
    fn finish_answered(&mut self) -> bool {
        while let Some(Some(_)) = self.next().now_or_never() {}
        self.is_empty()
    }

    /// Gives the requests in flight up to `passes` passes of the runtime's I/O driver to
    /// answer, finishing those that do; returns as soon as none is left, or after a pass
    /// that finished none. No timer: tokio's have a resolution of a millisecond, which a
    /// node that does not answer would then cost every caller.
    ///
    /// A pass that finished nothing means the answers are not on their sockets yet: the
    /// requests left are a round trip away, and further passes would only delay the
    /// caller.
    async fn linger(&mut self, passes: usize) {
        for _ in 0..passes {
            if self.is_empty() {
                return;
            }
            let before = self.len();
            // `yield_now` wakes the task again only after the runtime has polled its I/O
            // driver, which hands the answers that arrived meanwhile to their connections.
            tokio::task::yield_now().await;
            self.finish_answered();
            if self.len() == before {
                return;
            }
        }
    }
}

impl Flight {
    pub(crate) fn new(
        nodes: Arc<Nodes>,
        background: Background,
        timeout: Duration,
        lanes: Lanes,
    ) -> Self {
        let direct = Direct::new(Arc::clone(&nodes), timeout);
        Self {
            nodes,
            background,
            timeout,
            lanes,
            requests: Requests::new(direct),
        }
    }

    /// Starts every command `next` yields (a machine's `poll_transmit`), in order. The
    /// clocks are read once for all of them: each command's deadline runs from that reading,
    /// and a command that goes out without waiting for anything is admitted at it. A reading
    /// taken before the command goes out can only make its admission stricter (the core's
    /// quarantine ends at a time, never starts at one) and its deadline earlier.
    pub(crate) fn send_all(&mut self, mut next: impl FnMut() -> Option<Transmit>) {
        let Some(first) = next() else {
            return;
        };
        let pass = Pass {
            sent_at: Instant::now(),
            now: self.nodes.clock().now(),
        };
        self.send(first, pass);
        while let Some(transmit) = next() {
            self.send(transmit, pass);
        }
    }

    /// Starts `transmit` once the previous command to its node has finished, bounded by the
    /// per-node timeout: as a direct request when it can (`direct.rs`), else as a request
    /// future. A release whose previous command is a lock request still unanswered on the
    /// client's own connection is written behind it on that connection at once, as a direct
    /// request (see [`Gate::followable_on`]); any other lock request or release whose
    /// previous command has not ended waits for it parked with the direct requests
    /// ([`Direct::park`]), not as a future.
    fn send(&mut self, transmit: Transmit, pass: Pass) {
        let index = transmit.node.index();
        // A previous command that has already finished needs no waiting (the common case).
        let (gate, previous) = self.lanes.push(index);
        let done = OpensOnDrop::new(gate, previous.as_ref());
        // Only a lock request or a release can go direct: anything else is not moved
        // through the attempt.
        let deadline = pass.sent_at + self.timeout;
        let (declined, previous) = match previous {
            previous if !goes_direct(&transmit.command) => ((transmit, done, None), previous),
            None => match self
                .requests
                .side
                .send(transmit, pass.now, deadline, done, None)
            {
                Ok(()) => return,
                Err(declined) => (declined, None),
            },
            Some(previous) => {
                // A release behind a lock request unanswered on the client's own connection
                // is written behind it there; anything else waits in its lane, parked.
                let follows = transmit.command.is_release() && previous.followable_on().is_some();
                let waits = if follows {
                    self.write_behind(transmit, done, &previous, pass, deadline)
                } else {
                    Some((transmit, done))
                };
                if let Some((transmit, done)) = waits {
                    self.requests
                        .side
                        .park(transmit, previous, done, pass, deadline);
                }
                return;
            }
        };
        let request = self.request(pass, declined, previous);
        self.requests.push(request);
    }

    /// Writes `transmit`, a release, behind `previous`, a lock request still unanswered on
    /// the client's own connection (see [`Gate::followable_on`]). `None` once it has gone:
    /// behind it, or as a request future when the core answered it with anything but
    /// "send". Else the command and its gate come back, to wait in the lane (the connection
    /// is no longer the lock request's, or is broken).
    fn write_behind(
        &mut self,
        transmit: Transmit,
        done: OpensOnDrop,
        previous: &Arc<Gate>,
        pass: Pass,
        deadline: Instant,
    ) -> Option<(Transmit, OpensOnDrop)> {
        let behind = Some(Arc::clone(previous));
        match self
            .requests
            .side
            .send(transmit, pass.now, deadline, done, behind)
        {
            Ok(()) => None,
            Err((transmit, done, None)) => Some((transmit, done)),
            Err(declined) => {
                let request = self.request(pass, declined, Some(Arc::clone(previous)));
                self.requests.push(request);
                None
            }
        }
    }

    /// The request future of `declined`, sent at `pass` once `previous` has finished.
    fn request(
        &mut self,
        pass: Pass,
        declined: Declined,
        previous: Option<Arc<Gate>>,
    ) -> BoxFuture<'static, Completion> {
        let expiry = Arc::clone(self.requests.expiry());
        let nodes = Arc::clone(&self.nodes);
        request(nodes, expiry, self.timeout, pass, declined, previous)
    }

    /// The next finished request; `None` when nothing is in flight.
    pub(crate) async fn next(&mut self) -> Option<Completion> {
        self.requests.next().await
    }

    /// The next finished request, or [`Next::Due`] once `until` has passed: the driver's
    /// own deadline on the requests' timer, so that an operation arms one timer, not two.
    /// `None` when nothing is in flight and `until` is `None`.
    pub(crate) async fn next_until(&mut self, until: Option<Instant>) -> Option<Next> {
        std::future::poll_fn(|cx| self.requests.poll_until(until, cx)).await
    }

    /// After the operation's decision, gives the requests still in flight up to four passes
    /// of the runtime's I/O driver to finish, and finishes those that have; a pass that
    /// finishes none ends the wait (see [`Requests::linger`]).
    ///
    /// On healthy nodes the answers after the quorum's are on their sockets by then, and
    /// the operation ends with nothing left over: no background task, and nothing for the
    /// resource's next command on those nodes to wait for in the lanes. Handing two requests
    /// to a background task and queueing the next operation behind them cost a healthy
    /// acquire + release about a seventh of the client's CPU (`benches/cpu.rs`), when the
    /// commands behind them waited as request futures; since they are parked, no linger
    /// at all measures the same (docs/benchmarks.md). No timer:
    /// tokio's have a resolution of a millisecond, which a slow node would then cost every
    /// release (a first version waited up to the decision's own duration with a timer, and
    /// made each acquire + release with one node 20 ms slow a millisecond slower).
    pub(crate) async fn linger(&mut self) {
        self.requests.linger(LINGER_PASSES).await;
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.requests.is_empty()
    }

    /// Keeps the requests moving until `until` completes (used while waiting to retry), and
    /// returns its output.
    pub(crate) async fn run_until<T>(&mut self, until: impl Future<Output = T>) -> T {
        tokio::pin!(until);
        loop {
            tokio::select! {
                done = &mut until => return done,
                Some(_) = self.requests.next() => {}
            }
        }
    }

    /// The lanes, for the lease's next operation. What is still in flight continues in the
    /// background (see `Drop`).
    pub(crate) fn lanes(&self) -> Lanes {
        self.lanes.clone()
    }
}

/// The request future of a command that does not go direct (`declined`: with its gate, and
/// the admission a direct attempt got, if any), sent at `pass` once `previous`, the lane's
/// previous command to its node, has finished, and bounded by `timeout` on `expiry`.
pub(crate) fn request(
    nodes: Arc<Nodes>,
    expiry: Arc<Expiry>,
    timeout: Duration,
    pass: Pass,
    declined: Declined,
    previous: Option<Arc<Gate>>,
) -> BoxFuture<'static, Completion> {
    let (transmit, done, decided) = declined;
    Box::pin(async move {
        let Transmit {
            command,
            request,
            node,
        } = transmit;
        let index = node.index();
        // A release waits for the command before it however long that takes (that
        // command may have written the key it deletes), then gets its own timeout, and
        // a connect it has to make first does not count against it.
        // Anything else gives up when its round does, waiting in the lane included: a
        // command cut before it was sent wrote nothing, and a backlog of commands whose
        // rounds are long decided cannot build up behind a slow node.
        let release = command.is_release();
        let started = match &previous {
            Some(previous) if release => {
                previous.wait().await;
                Instant::now()
            }
            _ => pass.sent_at,
        };
        // What the command has waited for, or still must: the lane's previous command
        // (a release has waited for it above), and the pass's reading of the clock holds
        // for its admission only if nothing was waited for.
        let start = match (previous.as_deref(), decided) {
            (_, Some(decided)) => Start::Decided(decided),
            (None, None) => Start::At(pass.now),
            (Some(_), None) if release => Start::Waited,
            (Some(previous), None) => Start::After(previous),
        };
        // A release that must reopen its node's connection gets the connect its own
        // budget, then `timeout` again for itself (see `Nodes::execute`).
        let result = nodes
            .execute(
                index,
                command,
                start,
                &expiry,
                started + timeout,
                release.then_some(timeout),
            )
            .await;
        if let Err(failure) = &result {
            nodes.trace_failure(index, failure);
        }
        // Opens the gate of the next command to this node.
        drop(done);
        Completion { request, result }
    })
}

impl Drop for Flight {
    /// Hands the requests still in flight to a background task, so that nothing written to a
    /// node is left half done. Each is bounded by the per-node timeout.
    fn drop(&mut self) {
        if self.is_idle() {
            return;
        }
        let direct = Direct::empty(Arc::clone(&self.nodes), self.timeout);
        let mut requests = std::mem::replace(&mut self.requests, Requests::new(direct));
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                // An operation ends at its quorum, and the other nodes' answers have often
                // arrived by the time it is dropped: those are finished here, without a
                // background task. A spawned task, and the next command on each node waiting
                // for it in the lanes, cost a healthy acquire + release about a seventh of
                // the client's CPU (`benches/cpu.rs`).
                if requests.finish_answered() {
                    return;
                }
                // The resource's lanes stay alive with the requests: the next operation on
                // the resource queues behind them on each node.
                let lanes = self.lanes.clone();
                self.background.spawn(&runtime, async move {
                    while requests.next().await.is_some() {}
                    drop(lanes);
                })
            }
            Err(_) => tracing::warn!(
                requests = requests.len(),
                "no tokio runtime to finish in-flight lock requests; any key they set expires with its TTL"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;

    use super::*;
    use crate::client::expiry::Elapsed;

    /// A request that never answers, cut at `after` from now: yields its number, or
    /// `None` once its deadline passed.
    fn silent(requests: &mut Requests<(u32, Option<()>), ()>, number: u32, after: Duration) {
        let expiry = Arc::clone(requests.expiry());
        let at = Instant::now() + after;
        requests.push(Box::pin(async move {
            let outcome = expiry.timeout_at(at, pending::<()>()).await;
            (number, outcome.ok())
        }));
    }

    /// `requests.next()`, failing the test rather than hanging if nothing ends in 5 s.
    async fn next<T>(requests: &mut Requests<T, ()>) -> Option<T> {
        match next_until(requests, None).await {
            Some(Next::Done(done)) => Some(done),
            Some(Next::Due) => unreachable!("no deadline was given"),
            None => None,
        }
    }

    #[tokio::test]
    async fn requests_that_never_answer_end_at_their_deadlines_in_order() {
        let mut requests = Requests::default();
        let start = Instant::now();
        silent(&mut requests, 3, Duration::from_millis(90));
        silent(&mut requests, 1, Duration::from_millis(30));
        silent(&mut requests, 2, Duration::from_millis(60));
        for (number, deadline) in [(1, 30), (2, 60), (3, 90)] {
            let (which, outcome) = next(&mut requests).await.unwrap();
            let waited = start.elapsed();
            assert_eq!((which, outcome), (number, None));
            assert!(
                waited >= Duration::from_millis(deadline)
                    && waited < Duration::from_millis(deadline + 25),
                "request {number} ended after {waited:?}"
            );
        }
        assert!(next(&mut requests).await.is_none());
        assert_eq!(
            requests
                .expiry
                .as_ref()
                .map_or(0, |expiry| expiry.waiting()),
            0
        );
    }

    /// `requests.poll_until(until)`, failing the test rather than hanging.
    async fn next_until<T>(
        requests: &mut Requests<T, ()>,
        until: Option<Instant>,
    ) -> Option<Next<T>> {
        let next = std::future::poll_fn(|cx| requests.poll_until(until, cx));
        tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("a request or the deadline ends the wait within 5 s")
    }

    #[tokio::test(start_paused = true)]
    async fn the_drivers_deadline_rides_on_the_requests_timer() {
        let mut requests = Requests::default();
        let start = Instant::now();
        silent(&mut requests, 1, Duration::from_millis(90));
        let until = Some(start + Duration::from_millis(30));
        // The driver's deadline first, then the request's own.
        assert!(matches!(
            next_until(&mut requests, until).await,
            Some(Next::Due)
        ));
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(30),
            "due at its deadline"
        );
        let later = Some(start + Duration::from_secs(30));
        let Some(Next::Done((which, outcome))) = next_until(&mut requests, later).await else {
            panic!("the request ends at its deadline, before the driver's");
        };
        assert_eq!((which, outcome), (1, None));
        assert!(start.elapsed() >= Duration::from_millis(90));
        // Nothing in flight: the driver's deadline alone.
        let soon = Some(Instant::now() + Duration::from_millis(10));
        assert!(matches!(
            next_until(&mut requests, soon).await,
            Some(Next::Due)
        ));
        assert!(next_until(&mut requests, None).await.is_none());
    }

    /// A request cut at the driver's deadline, or before it, ends before the deadline is
    /// reported, as when the driver had a timer of its own polled after the requests.
    #[tokio::test(start_paused = true)]
    async fn requests_due_by_the_drivers_deadline_end_before_it_is_reported() {
        let mut requests = Requests::default();
        let start = Instant::now();
        silent(&mut requests, 1, Duration::from_millis(30));
        silent(&mut requests, 2, Duration::from_millis(20));
        let until = Some(start + Duration::from_millis(30));
        // The timer is armed at 20 ms; the task first looks again at 40 ms (both passed).
        assert!(next_until(&mut requests, until).now_or_never().is_none());
        tokio::time::sleep(Duration::from_millis(40)).await;
        let mut ended = Vec::new();
        while let Some(Next::Done((which, None))) = next_until(&mut requests, until).await {
            ended.push(which);
        }
        ended.sort_unstable();
        assert_eq!(
            ended,
            [1, 2],
            "both requests end before the deadline is reported"
        );
        assert!(matches!(
            next_until(&mut requests, until).await,
            Some(Next::Due)
        ));
    }

    #[tokio::test]
    async fn an_earlier_deadline_sent_later_moves_the_timer_earlier() {
        let mut requests = Requests::default();
        let start = Instant::now();
        silent(&mut requests, 1, Duration::from_secs(30));
        // Polled once: the timer is armed at the first request's deadline.
        assert!(requests.next().now_or_never().is_none());
        silent(&mut requests, 2, Duration::from_millis(20));
        let (which, outcome) = next(&mut requests).await.unwrap();
        assert_eq!((which, outcome), (2, None));
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn answered_requests_leave_no_deadline_behind() {
        let mut requests: Requests<Result<u32, Elapsed>, ()> = Requests::default();
        for number in 0..3 {
            let expiry = Arc::clone(requests.expiry());
            let at = Instant::now() + Duration::from_secs(5);
            requests.push(Box::pin(async move {
                expiry
                    .timeout_at(at, async move {
                        tokio::task::yield_now().await;
                        number
                    })
                    .await
            }));
        }
        let mut answers = Vec::new();
        while let Some(answer) = next(&mut requests).await {
            answers.push(answer.unwrap());
        }
        answers.sort_unstable();
        assert_eq!(answers, [0, 1, 2]);
        assert_eq!(
            requests
                .expiry
                .as_ref()
                .map_or(0, |expiry| expiry.waiting()),
            0
        );
    }

    /// A request that answers after yielding `yields` times, as an answer arriving on a
    /// later pass of the runtime's I/O driver does.
    fn answering(requests: &mut Requests<(u32, Option<()>), ()>, number: u32, yields: usize) {
        requests.push(Box::pin(async move {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            (number, Some(()))
        }));
    }

    #[tokio::test]
    async fn requests_already_answered_are_finished_without_waiting() {
        let mut requests = Requests::default();
        answering(&mut requests, 1, 0);
        answering(&mut requests, 2, 0);
        assert!(requests.finish_answered());
        answering(&mut requests, 3, 0);
        silent(&mut requests, 4, Duration::from_secs(30));
        assert!(!requests.finish_answered());
        assert_eq!(requests.futures(), 1);
    }

    // On a paused clock the runtime moves time forward whenever every task waits on a timer,
    // so a linger that waited on one, however briefly, would show as time gone by.
    #[tokio::test(start_paused = true)]
    async fn a_linger_finishes_late_answers_and_leaves_a_silent_node_without_a_timer() {
        let mut requests = Requests::default();
        answering(&mut requests, 1, 1);
        answering(&mut requests, 2, 2);
        silent(&mut requests, 3, Duration::from_secs(30));
        // Sent and polled once, as the operation's driver has by its decision.
        assert!(!requests.finish_answered());
        let start = Instant::now();
        requests.linger(LINGER_PASSES).await;
        assert_eq!(Instant::now(), start, "the linger waited on a timer");
        assert_eq!(
            requests.futures(),
            1,
            "the answers after the decision are finished"
        );
        assert!(!requests.finish_answered());
    }

    /// The passes of the runtime while `linger` runs: a task beside it on a current-thread
    /// runtime counts one per pass.
    async fn passes_of_a_linger(requests: &mut Requests<(u32, Option<()>), ()>) -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let passes = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&passes);
        let counting = tokio::spawn(async move {
            loop {
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        // The counter's first poll, before the linger starts.
        tokio::task::yield_now().await;
        let before = passes.load(Ordering::Relaxed);
        requests.linger(LINGER_PASSES).await;
        let during = passes.load(Ordering::Relaxed) - before;
        counting.abort();
        during
    }

    // Requests that are a round trip away (a release still waiting in its lane for a
    // `SET`) answer in none of the passes: the linger gives up after the first rather than
    // delay the caller by all of them.
    #[tokio::test(start_paused = true)]
    async fn a_linger_stops_after_a_pass_that_finished_nothing() {
        let mut requests = Requests::default();
        silent(&mut requests, 1, Duration::from_secs(30));
        silent(&mut requests, 2, Duration::from_secs(30));
        assert!(!requests.finish_answered());
        assert_eq!(passes_of_a_linger(&mut requests).await, 1);
        assert_eq!(requests.futures(), 2);

        // While each pass finishes something, it goes on.
        let mut requests = Requests::default();
        answering(&mut requests, 1, 1);
        answering(&mut requests, 2, 2);
        silent(&mut requests, 3, Duration::from_secs(30));
        assert!(!requests.finish_answered());
        assert_eq!(passes_of_a_linger(&mut requests).await, 3);
        assert_eq!(requests.futures(), 1);
    }
}
