"builtin.module"() ({
  "netc.param"() {sym_name = "fc1.weight", type = tensor<6x4xf32>} : () -> () loc("tests/golden/partition/location.nd":5:3)
  "netc.param"() {sym_name = "fc1.bias", type = tensor<4xf32>} : () -> () loc("tests/golden/partition/location.nd":5:3)
  "netc.param"() {sym_name = "fc2.weight", type = tensor<4x2xf32>} : () -> () loc("tests/golden/partition/location.nd":6:3)
  "netc.param"() {sym_name = "fc2.bias", type = tensor<2xf32>} : () -> () loc("tests/golden/partition/location.nd":6:3)
  "netc.network"() ({
    %x = "netc.input"() {name = "x", dtype = "f32", shape = [4, 6], worker = 0} : () -> tensor<4x6xf32> loc("tests/golden/partition/location.nd":4:9)
    %fc1 = "netc.inner_product"(%x) {name = "fc1", location = 0, num_outputs = 4, params = {weight = @fc1.weight, bias = @fc1.bias}, worker = 0} : (tensor<4x6xf32>) -> tensor<4x4xf32> loc("tests/golden/partition/location.nd":5:3)
    %fc1.send_0-_1_ = "netc.send"(%fc1) {name = "fc1.send(0->1)", peer = 1, worker = 0} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("tests/golden/partition/location.nd":6:3)
    %fc1.recv_0-_1_ = "netc.recv"(%fc1.send_0-_1_) {name = "fc1.recv(0->1)", peer = 0, worker = 1} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("tests/golden/partition/location.nd":6:3)
    %fc2 = "netc.inner_product"(%fc1.recv_0-_1_) {name = "fc2", location = 1, num_outputs = 2, params = {weight = @fc2.weight, bias = @fc2.bias}, worker = 1} : (tensor<4x4xf32>) -> tensor<4x2xf32> loc("tests/golden/partition/location.nd":6:3)
    "netc.output"(%fc2) : (tensor<4x2xf32>) -> () loc("tests/golden/partition/location.nd":3:9)
  }) {sym_name = "pipeline", workers = 2} : () -> () loc("tests/golden/partition/location.nd":3:9)
}) {source = "tests/golden/partition/location.nd"} : () -> () loc("tests/golden/partition/location.nd":1:1)
