// swift-tools-version:5.9
// The Swift package of bindings-uniffi. This file is the template that
// bindings-uniffi/scripts/release copies into OUT_DIR/swift, next to:
//   Sources/StapelRunnerProtocol/StapelRunnerProtocol.swift   the generated bindings
//   Sources/StapelRunnerProtocolFFI/                          the generated C header and a
//       module.modulemap for Linux (the generated one without `use "Darwin"`, with `link`)
//   apple-headers/                                            the header and module map as
//       generated, for `xcodebuild -create-xcframework -headers`
//   lib/linux-x86-64/                                         the Linux library and its
//       pkg-config file (pkgconfig/stapel-runner-protocol-uniffi.pc)
// On Apple platforms the C module is StapelRunnerProtocolFFI.xcframework, built on a Mac
// (see bindings-uniffi/README.md, "Swift package"). Not compiled by this project's scripts:
// the machines they run on have no Swift toolchain.
import PackageDescription

#if os(Linux)
// PKG_CONFIG_PATH=<package>/lib/linux-x86-64/pkgconfig swift build
let ffi: Target = .systemLibrary(
    name: "StapelRunnerProtocolFFI",
    path: "Sources/StapelRunnerProtocolFFI",
    pkgConfig: "stapel-runner-protocol-uniffi"
)
#else
let ffi: Target = .binaryTarget(
    name: "StapelRunnerProtocolFFI",
    path: "StapelRunnerProtocolFFI.xcframework"
)
#endif

let package = Package(
    name: "StapelRunnerProtocol",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "StapelRunnerProtocol", targets: ["StapelRunnerProtocol"]),
    ],
    targets: [
        ffi,
        .target(
            name: "StapelRunnerProtocol",
            dependencies: ["StapelRunnerProtocolFFI"],
            path: "Sources/StapelRunnerProtocol"
        ),
    ]
)
