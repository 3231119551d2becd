"builtin.module"() ({
  "netc.network"() ({
    %a = "netc.input"() {name = "a", dtype = "f32", shape = [2, 5, 5, 3]} : () -> tensor<2x5x5x3xf32> loc("tests/golden/shape-inference/concat.nd":3:9)
    %b = "netc.input"() {name = "b", dtype = "f32", shape = [2, 5, 5, 4]} : () -> tensor<2x5x5x4xf32> loc("tests/golden/shape-inference/concat.nd":4:9)
    %c = "netc.input"() {name = "c", dtype = "f32", shape = [2, 5, 5, 1]} : () -> tensor<2x5x5x1xf32> loc("tests/golden/shape-inference/concat.nd":5:9)
    %rows = "netc.input"() {name = "rows", dtype = "f32", shape = [6, 5, 5, 3]} : () -> tensor<6x5x5x3xf32> loc("tests/golden/shape-inference/concat.nd":6:9)
    %channels = "netc.concat"(%a, %b, %c) {name = "channels"} : (tensor<2x5x5x3xf32>, tensor<2x5x5x4xf32>, tensor<2x5x5x1xf32>) -> tensor<2x5x5x8xf32> loc("tests/golden/shape-inference/concat.nd":7:3)
    %batch = "netc.concat"(%a, %rows) {name = "batch", dim = 0} : (tensor<2x5x5x3xf32>, tensor<6x5x5x3xf32>) -> tensor<8x5x5x3xf32> loc("tests/golden/shape-inference/concat.nd":8:3)
    %mixed = "netc.elementwise"(%a, %a, %a) {name = "mixed", operation = "max"} : (tensor<2x5x5x3xf32>, tensor<2x5x5x3xf32>, tensor<2x5x5x3xf32>) -> tensor<2x5x5x3xf32> loc("tests/golden/shape-inference/concat.nd":9:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/shape-inference/concat.nd":2:9)
}) {source = "tests/golden/shape-inference/concat.nd"} : () -> () loc("tests/golden/shape-inference/concat.nd":1:1)
