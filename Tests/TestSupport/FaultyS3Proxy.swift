import ArchiveLocking
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// An HTTP forwarder on 127.0.0.1 in front of an S3 server (``CephGateway``) that misbehaves
/// on demand: it answers the next requests `503 SlowDown` without forwarding them
/// (``failNext(_:)``), forwards the next requests and then closes the connection instead of
/// answering (``loseNextAnswers(_:)``: the write happened, the client cannot know), or drops
/// `If-None-Match` and `If-Match` on the way (``stripConditionalHeaders``), so the server
/// behaves as one that ignores conditional writes.
///
/// The client leaves those headers unsigned (SignatureV4.swift's caller says why), so the
/// server still takes the signature. The Host header is forwarded as the client signed it.
public final class FaultyS3Proxy: Sendable {
    /// The port to point the client at.
    public let port: Int
    private let channel: any Channel
    private let proxy: ProxyState

    struct Faults {
        var failuresLeft = 0
        var lostAnswersLeft = 0
        var stripConditionalHeaders = false
        var requests = 0
        var failed = 0
        var inFlight = 0
        var maxInFlight = 0
        /// Requests are held until this many are in flight at once (0: none held).
        var gather = 0
    }

    /// `http://127.0.0.1:port`.
    public var endpoint: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Answers the next `count` requests with 503 SlowDown.
    public func failNext(_ count: Int) { proxy.faults.withLock { $0.failuresLeft = count } }

    /// Forwards the next `count` requests, then drops each answer and the connection.
    public func loseNextAnswers(_ count: Int) { proxy.faults.withLock { $0.lostAnswersLeft = count } }

    /// Whether it drops `If-None-Match` and `If-Match` from the requests it forwards.
    public var stripConditionalHeaders: Bool {
        get { proxy.faults.withLock { $0.stripConditionalHeaders } }
        set { proxy.faults.withLock { $0.stripConditionalHeaders = newValue } }
    }

    /// Holds each next request until `count` are in flight at once (or 5 s have passed: a
    /// client that sends them one after the other is only slowed), and counts the most in
    /// flight at once from now (``maxInFlight``).
    public func gather(_ count: Int) {
        proxy.faults.withLock { faults in
            faults.gather = count
            faults.maxInFlight = faults.inFlight
        }
    }

    /// The most requests in flight at once since ``gather(_:)``.
    public var maxInFlight: Int { proxy.faults.withLock { $0.maxInFlight } }

    /// Requests received, and how many of them it answered 503.
    public var counts: (requests: Int, failed: Int) { proxy.faults.withLock { ($0.requests, $0.failed) } }

    /// Starts one that forwards to `upstream` (`http://host:port`).
    public static func start(upstream: URL) async throws -> FaultyS3Proxy {
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(redirectConfiguration: .disallow))
        let proxyState = ProxyState(upstream: upstream, client: client)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(ForwardingHandler(proxy: proxyState))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return FaultyS3Proxy(port: channel.localAddress?.port ?? 0, channel: channel, proxy: proxyState)
    }

    private init(port: Int, channel: any Channel, proxy: ProxyState) {
        self.port = port
        self.channel = channel
        self.proxy = proxy
    }

    /// Stops listening and closes its connections to the server.
    public func stop() async throws {
        try await channel.close().get()
        try await proxy.client.shutdown()
    }
}

private final class ProxyState: Sendable {
    let upstream: URL
    let client: HTTPClient
    let faults = TracedMutex(FaultyS3Proxy.Faults())

    init(upstream: URL, client: HTTPClient) {
        self.upstream = upstream
        self.client = client
    }

    /// The answer to one whole request: a 503 of its own, or the server's; nil to close the
    /// connection instead.
    func answer(_ head: HTTPRequestHead, _ body: ByteBuffer) async -> (HTTPResponseHead, ByteBuffer)? {
        let (fail, lose, strip) = faults.withLock { faults in
            faults.requests += 1
            faults.inFlight += 1
            faults.maxInFlight = max(faults.maxInFlight, faults.inFlight)
            if faults.gather > 0 && faults.inFlight >= faults.gather { faults.gather = 0 }
            let fail = faults.failuresLeft > 0
            if fail {
                faults.failuresLeft -= 1
                faults.failed += 1
            }
            let lose = !fail && faults.lostAnswersLeft > 0
            if lose { faults.lostAnswersLeft -= 1 }
            return (fail, lose, faults.stripConditionalHeaders)
        }
        defer { faults.withLock { $0.inFlight -= 1 } }
        let deadline = ContinuousClock.now + .seconds(5)
        while faults.withLock({ $0.gather > 0 }) && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        faults.withLock { $0.gather = 0 }  // held once at most
        if fail {
            let text = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>injected by the test proxy</Message></Error>"
            return (HTTPResponseHead(version: .http1_1, status: .serviceUnavailable), ByteBuffer(string: text))
        }
        var request = HTTPClientRequest(url: upstream.absoluteString + head.uri)
        request.method = head.method
        for (name, value) in head.headers {
            let lowered = name.lowercased()
            if ["connection", "content-length", "transfer-encoding"].contains(lowered) { continue }
            if strip && (lowered == "if-none-match" || lowered == "if-match") { continue }
            request.headers.add(name: name, value: value)
        }
        if body.readableBytes > 0 { request.body = .bytes(body) }
        do {
            let response = try await client.execute(request, timeout: .seconds(60))
            let answer = try await response.body.collect(upTo: 1 << 30)
            if lose { return nil }
            var headers = response.headers
            headers.remove(name: "transfer-encoding")
            headers.remove(name: "connection")
            if head.method != .HEAD { headers.replaceOrAdd(name: "content-length", value: String(answer.readableBytes)) }
            return (HTTPResponseHead(version: .http1_1, status: response.status, headers: headers), answer)
        } catch {
            return (HTTPResponseHead(version: .http1_1, status: .badGateway), ByteBuffer(string: "proxy: \(error)"))
        }
    }
}

private final class ForwardingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let proxy: ProxyState
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()

    init(proxy: ProxyState) { self.proxy = proxy }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            let body = self.body
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let proxy = self.proxy
            Task {
                let reply = await proxy.answer(head, body)
                bound.eventLoop.execute {
                    guard let reply else {
                        bound.value.close(promise: nil)
                        return
                    }
                    var responseHead = reply.0
                    let answer = reply.1
                    if responseHead.headers["content-length"].isEmpty && head.method != .HEAD {
                        responseHead.headers.add(name: "content-length", value: String(answer.readableBytes))
                    }
                    let context = bound.value
                    context.write(NIOAny(HTTPServerResponsePart.head(responseHead)), promise: nil)
                    if head.method != .HEAD { context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(answer))), promise: nil) }
                    context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
                }
            }
        }
    }
}
