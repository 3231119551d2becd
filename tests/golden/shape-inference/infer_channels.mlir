"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 10, 10, 7]} : () -> tensor<4x10x10x7xf32> loc("tests/golden/shape-inference/infer_channels.nd":3:9)
    %a = "netc.conv2d"(%data) {name = "a", filter = [3, 3, -1, 12], padding = "VALID"} : (tensor<4x10x10x7xf32>) -> tensor<4x8x8x12xf32> loc("tests/golden/shape-inference/infer_channels.nd":4:3)
    %b = "netc.conv2d"(%a) {name = "b", filter = [1, 1, -1, 5]} : (tensor<4x8x8x12xf32>) -> tensor<4x8x8x5xf32> loc("tests/golden/shape-inference/infer_channels.nd":5:3)
    %c = "netc.deconv2d"(%b) {name = "c", filter = [3, 3, 5, 5], output_shape = [4, 8, 8, 5], padding = "SAME"} : (tensor<4x8x8x5xf32>) -> tensor<4x8x8x5xf32> loc("tests/golden/shape-inference/infer_channels.nd":6:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/shape-inference/infer_channels.nd":2:9)
}) {source = "tests/golden/shape-inference/infer_channels.nd"} : () -> () loc("tests/golden/shape-inference/infer_channels.nd":1:1)
