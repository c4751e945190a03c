import ArchiveLocking
import Foundation

/// A task executor with one thread of its own, for tasks that must keep running while other
/// tests block Swift's cooperative pool (two threads on two cores): a live session's events,
/// collected while another suite waits on processes. A collector on the pool saw no event for
/// over a minute in a full run.
public final class ThreadExecutor: TaskExecutor, Sendable {
    /// One for the whole test process: its thread lives as long as the process.
    public static let shared = ThreadExecutor(name: "test events")

    private let jobs = TracedMutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    /// Starts the executor's thread, which runs until ``finish()``.
    init(name: String) {
        let thread = Thread { [self] in
            while true {
                ready.wait()
                // Each signal is a job, or the finish once every job before it has run.
                guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    /// Ends the thread once the jobs enqueued before this call have run.
    func finish() { ready.signal() }
}

/// Calls `body` with each element of `stream` on ``ThreadExecutor/shared``, off the cooperative
/// pool; the task ends with the stream or when cancelled.
public func collectOffPool<Element: Sendable>(
    _ stream: AsyncStream<Element>, _ body: @escaping @Sendable (Element) -> Void, ended: @escaping @Sendable () -> Void = {}
) -> Task<Void, Never> {
    Task(executorPreference: ThreadExecutor.shared) {
        for await element in stream { body(element) }
        ended()
    }
}
