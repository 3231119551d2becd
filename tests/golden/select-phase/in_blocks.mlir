"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 8, 8, 3]} : () -> tensor<*xf32> loc("tests/golden/select-phase/in_blocks.nd":4:9)
    "netc.block"() ({
      %c = "netc.conv2d"() {name = "c", filter = [3, 3, 3, 8], parents = []} : () -> tensor<*xf32> loc("tests/golden/select-phase/in_blocks.nd":6:5)
      %out = "netc.relu"() {name = "out", parents = ["c"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/in_blocks.nd":8:5)
    }) {name = "b", endpoint = "out", parents = ["data"]} : () -> () loc("tests/golden/select-phase/in_blocks.nd":5:9)
    %r = "netc.relu"() {name = "r", parents = ["b"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/in_blocks.nd":10:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/select-phase/in_blocks.nd":3:9)
}) {source = "tests/golden/select-phase/in_blocks.nd"} : () -> () loc("tests/golden/select-phase/in_blocks.nd":1:1)
