"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 12]} : () -> tensor<4x12xf32> loc("tests/golden/dce/no_output.nd":3:9)
    %a = "netc.tanh"(%data) {name = "a"} : (tensor<4x12xf32>) -> tensor<4x12xf32> loc("tests/golden/dce/no_output.nd":4:3)
    %b = "netc.sigmoid"(%data) {name = "b"} : (tensor<4x12xf32>) -> tensor<4x12xf32> loc("tests/golden/dce/no_output.nd":5:3)
    %c = "netc.relu"(%a) {name = "c"} : (tensor<4x12xf32>) -> tensor<4x12xf32> loc("tests/golden/dce/no_output.nd":6:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/dce/no_output.nd":2:9)
}) {source = "tests/golden/dce/no_output.nd"} : () -> () loc("tests/golden/dce/no_output.nd":1:1)
