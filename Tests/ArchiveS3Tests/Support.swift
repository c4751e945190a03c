import ArchiveS3
import Foundation
import TestSupport

/// Runs `body` with a client of a new bucket on the process's shared gateway, and shuts the
/// client down afterwards, whether `body` returns or throws.
func withBucket<T>(
    _ adjust: (inout S3Configuration) -> Void = { _ in }, _ body: (S3Client, CephGateway) async throws -> T
) async throws -> T {
    let gateway = try await CephGateway.shared()
    var configuration = gateway.configuration(bucket: try await gateway.makeBucket())
    adjust(&configuration)
    return try await withClient(configuration) { try await body($0, gateway) }
}

/// Runs `body` with a client of a new bucket on the shared gateway that goes through a
/// ``FaultyS3Proxy``; both are stopped afterwards.
func withProxiedBucket<T>(_ body: (S3Client, FaultyS3Proxy) async throws -> T) async throws -> T {
    let gateway = try await CephGateway.shared()
    let bucket = try await gateway.makeBucket()
    return try await withProxy(gateway) { proxy in
        var configuration = gateway.configuration(bucket: bucket)
        configuration.endpoint = proxy.endpoint
        return try await withClient(configuration) { try await body($0, proxy) }
    }
}

/// Runs `body` with a client of `configuration`, shut down afterwards.
func withClient<T>(_ configuration: S3Configuration, _ body: (S3Client) async throws -> T) async throws -> T {
    try await using(S3Client(configuration), stop: { try await $0.shutdown() }, body)
}

/// Runs `body` with a proxy in front of `gateway`, stopped afterwards.
func withProxy<T>(_ gateway: CephGateway, _ body: (FaultyS3Proxy) async throws -> T) async throws -> T {
    try await using(try await FaultyS3Proxy.start(upstream: gateway.endpoint), stop: { try await $0.stop() }, body)
}

/// Runs `body` with `resource` and stops it afterwards, whether `body` returns or throws.
private func using<Resource, T>(
    _ resource: Resource, stop: (Resource) async throws -> Void, _ body: (Resource) async throws -> T
) async throws -> T {
    let result: T
    do {
        result = try await body(resource)
    } catch {
        try? await stop(resource)
        throw error
    }
    try await stop(resource)
    return result
}
