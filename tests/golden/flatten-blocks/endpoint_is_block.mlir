"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_is_block.nd":3:9)
    %a.b.c = "netc.relu"() {name = "a/b/c", parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_is_block.nd":6:7)
    %y = "netc.sigmoid"() {name = "y", parents = ["a/b/c"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_is_block.nd":9:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/flatten-blocks/endpoint_is_block.nd":2:9)
}) {source = "tests/golden/flatten-blocks/endpoint_is_block.nd"} : () -> () loc("tests/golden/flatten-blocks/endpoint_is_block.nd":1:1)
