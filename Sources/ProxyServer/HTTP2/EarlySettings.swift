import NIOCore

/// Makes hookproxy's own HTTP/2 SETTINGS hold from the client's first request on, not from the client's
/// acknowledgement of them. NIO applies local settings when the peer acknowledges them (RFC 9113 §6.5.3), and until
/// then its HPACK decoder takes header lists of 16 KiB at most. curl and browsers send their first requests before
/// they acknowledge, so a first request head over 16 KiB (large cookies) failed the whole connection with GOAWAY
/// COMPRESSION_ERROR, where HTTP/1.1 took the same head. hookproxy's settings only relax the defaults (a larger header
/// list and stream window, the default 100 streams), so holding them early asks nothing of the client that it was
/// not allowed.
///
/// Before NIO's handler, on the client's bytes: after the connection preface and the client's first SETTINGS frame it
/// puts in the acknowledgement NIO waits for, and it takes out the client's own when it comes (so NIO sees exactly
/// one). Only frame headers are read (9 bytes each; payloads pass as they are); once the client's acknowledgement
/// is gone, it steps out of the pipeline. A client that does not start with SETTINGS is passed on untouched, for NIO
/// to refuse.
///
/// Loop-bound: one per HTTP/2 connection.
final class EarlySettings: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum Phase {
        /// Bytes of the client's connection preface still to pass.
        case preface(left: Int)
        /// Waiting for the client's first frame, which must be SETTINGS.
        case firstSettings
        /// The acknowledgement goes in once the SETTINGS payload has passed.
        case settingsPayload
        /// Waiting for the client's own acknowledgement, to take it out.
        case clientAcknowledgement
        case done
    }

    private static let prefaceLength = 24
    private static let settingsType: UInt8 = 0x4
    private static let ackFlag: UInt8 = 0x1
    /// A SETTINGS frame with the ACK flag, no payload, on stream 0.
    private static let acknowledgement: [UInt8] = [0, 0, 0, settingsType, ackFlag, 0, 0, 0, 0]

    private var phase = Phase.preface(left: prefaceLength)
    /// Payload bytes of the frame under way still to pass before the next frame header.
    private var payloadLeft = 0
    /// A frame header cut across reads.
    private var header: [UInt8] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .done = phase { return context.fireChannelRead(data) }
        var input = unwrapInboundIn(data)
        var output = context.channel.allocator.buffer(capacity: input.readableBytes + Self.acknowledgement.count)
        scan(&input, into: &output)
        output.writeBuffer(&input)  // what follows the client's acknowledgement (or an unexpected start)
        if output.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(output)) }
        if case .done = phase { context.pipeline.syncOperations.removeHandler(self, promise: nil) }
    }

    private func scan(_ input: inout ByteBuffer, into output: inout ByteBuffer) {
        while input.readableBytes > 0 {
            switch phase {
            case .done:
                return
            case .preface(let left):
                var part = input.readSlice(length: min(left, input.readableBytes))!
                phase = left - part.readableBytes == 0 ? .firstSettings : .preface(left: left - part.readableBytes)
                output.writeBuffer(&part)
            case .firstSettings, .settingsPayload, .clientAcknowledgement:
                if payloadLeft > 0 {
                    var part = input.readSlice(length: min(payloadLeft, input.readableBytes))!
                    payloadLeft -= part.readableBytes
                    output.writeBuffer(&part)
                    if payloadLeft == 0, case .settingsPayload = phase { acknowledge(into: &output) }
                    continue
                }
                let wanted = 9 - header.count
                header += input.readBytes(length: min(wanted, input.readableBytes))!
                guard header.count == 9 else { return }
                frame(header, into: &output)
                header.removeAll(keepingCapacity: true)
            }
        }
    }

    /// A whole frame header: passed on (with its payload after it), or the client's acknowledgement, taken out.
    private func frame(_ bytes: [UInt8], into output: inout ByteBuffer) {
        let length = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
        let isSettings = bytes[3] == Self.settingsType
        let isAcknowledgement = isSettings && bytes[4] & Self.ackFlag != 0
        switch phase {
        case .firstSettings:
            output.writeBytes(bytes)
            guard isSettings, !isAcknowledgement else {
                phase = .done  // not HTTP/2 as RFC 9113 §3.4 has it: NIO answers that
                return
            }
            payloadLeft = length
            phase = .settingsPayload
            if length == 0 { acknowledge(into: &output) }
        case .clientAcknowledgement where isAcknowledgement && length == 0:
            phase = .done
        default:
            output.writeBytes(bytes)
            payloadLeft = length
        }
    }

    private func acknowledge(into output: inout ByteBuffer) {
        output.writeBytes(Self.acknowledgement)
        phase = .clientAcknowledgement
    }
}

@available(*, unavailable)
extension EarlySettings: Sendable {}
