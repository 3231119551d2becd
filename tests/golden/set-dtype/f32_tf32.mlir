"builtin.module"() ({
  "netc.param"() {sym_name = "conv.weight", type = tensor<3x3x3x4xf32>} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":6:3)
  "netc.param"() {sym_name = "conv.bias", type = tensor<4xf32>} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":6:3)
  "netc.param"() {sym_name = "ip.weight", type = tensor<64x5xf32>} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":7:3)
  "netc.param"() {sym_name = "ip.bias", type = tensor<5xf32>} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":7:3)
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 6, 6, 3]} : () -> tensor<2x6x6x3xf32> loc("tests/golden/set-dtype/f32_tf32.nd":5:9)
    %conv = "netc.conv2d"(%data) {name = "conv", filter = [3, 3, 3, 4], padding = "VALID", params = {weight = @conv.weight, bias = @conv.bias}} : (tensor<2x6x6x3xf32>) -> tensor<2x4x4x4xf32> loc("tests/golden/set-dtype/f32_tf32.nd":6:3)
    %ip = "netc.inner_product"(%conv) {name = "ip", num_outputs = 5, params = {weight = @ip.weight, bias = @ip.bias}} : (tensor<2x4x4x4xf32>) -> tensor<2x5xf32> loc("tests/golden/set-dtype/f32_tf32.nd":7:3)
  }) {sym_name = "net", netc.precision = {dtype = "f32", accumulate = "f32", tf32 = true}} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":4:9)
}) {source = "tests/golden/set-dtype/f32_tf32.nd"} : () -> () loc("tests/golden/set-dtype/f32_tf32.nd":1:1)
