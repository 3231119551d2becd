"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 12]} : () -> tensor<4x12xf32> loc("tests/golden/dce/output_statement.nd":4:9)
    %unused = "netc.input"() {name = "unused", dtype = "f32", shape = [4, 3]} : () -> tensor<4x3xf32> loc("tests/golden/dce/output_statement.nd":5:9)
    %hidden = "netc.inner_product"(%data) {name = "hidden", num_outputs = 8} : (tensor<4x12xf32>) -> tensor<4x8xf32> loc("tests/golden/dce/output_statement.nd":6:3)
    %act = "netc.relu"(%hidden) {name = "act"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("tests/golden/dce/output_statement.nd":7:3)
    %prob = "netc.softmax"(%act) {name = "prob"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("tests/golden/dce/output_statement.nd":8:3)
    "netc.output"(%prob) : (tensor<4x8xf32>) -> () loc("tests/golden/dce/output_statement.nd":11:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/dce/output_statement.nd":3:9)
}) {source = "tests/golden/dce/output_statement.nd"} : () -> () loc("tests/golden/dce/output_statement.nd":1:1)
