"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 10]} : () -> tensor<4x10xf32> loc("tests/golden/dce/two_outputs.nd":3:9)
    %labels = "netc.input"() {name = "labels", dtype = "f32", shape = [4]} : () -> tensor<4xf32> loc("tests/golden/dce/two_outputs.nd":4:9)
    %fc = "netc.inner_product"(%data) {name = "fc", num_outputs = 5} : (tensor<4x10xf32>) -> tensor<4x5xf32> loc("tests/golden/dce/two_outputs.nd":5:3)
    %loss = "netc.softmax_loss"(%fc, %labels) {name = "loss"} : (tensor<4x5xf32>, tensor<4xf32>) -> tensor<f32> loc("tests/golden/dce/two_outputs.nd":6:3)
    "netc.output"(%loss, %fc) : (tensor<f32>, tensor<4x5xf32>) -> () loc("tests/golden/dce/two_outputs.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/dce/two_outputs.nd":2:9)
}) {source = "tests/golden/dce/two_outputs.nd"} : () -> () loc("tests/golden/dce/two_outputs.nd":1:1)
