// One LIST of a prefix with the project's S3 client, in this process: the anchor of the no-op
// sync without awscli's start (Python's, 0.3-2 s on this machine).

import ArchiveS3
import BenchSupport
import Foundation
import Synchronization
import TestSupport

extension BenchGateway {
    /// The time of one listing of `prefix` in `bucket` by a new client (its connection
    /// included), as a process that syncs would make it.
    func timeOneList(bucket: String, prefix: String) throws -> Double {
        try timeRequests(bucket: bucket) { client in _ = try await client.list(prefix: prefix) }
    }

    /// The time of the requests a no-op sync needs, by a new client: the probe, a conditional
    /// PUT over the marker at `marker` that the server refuses, then one listing of `prefix`.
    func timeNoOpRequests(bucket: String, marker: String, prefix: String) throws -> Double {
        try timeRequests(bucket: bucket) { client in
            do {
                try await client.put(marker, Data("{\"probe\":\"bench\"}".utf8), condition: .ifNoneMatch)
                throw BenchError("the gateway took a conditional PUT over \(marker)")
            } catch S3Error.preconditionFailed {}
            _ = try await client.list(prefix: prefix)
        }
    }

    /// The time of `requests` by a new client of `bucket` (its connection included).
    private func timeRequests(bucket: String, _ requests: @escaping @Sendable (S3Client) async throws -> Void) throws -> Double {
        let configuration = gateway.configuration(bucket: bucket)
        let outcome = Mutex<Result<Double, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let start = ContinuousClock.now
            let client = S3Client(configuration)
            let result: Result<Double, any Error>
            do {
                try await requests(client)
                result = .success((ContinuousClock.now - start).seconds)
            } catch {
                result = .failure(error)
            }
            try? await client.shutdown()
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}
