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
        let configuration = gateway.configuration(bucket: bucket)
        let outcome = Mutex<Result<Double, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let start = ContinuousClock.now
            let client = S3Client(configuration)
            let result: Result<Double, any Error>
            do {
                _ = try await client.list(prefix: prefix)
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
