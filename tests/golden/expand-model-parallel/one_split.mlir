"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 10]} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/one_split.nd":3:9)
    %p.a$0 = "netc.inner_product"() {name = "p/a@0", num_outputs = 5, parents = ["data"], split_index = 0, splits = 1} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/one_split.nd":5:5)
    %p.b$0 = "netc.sigmoid"() {name = "p/b@0", parents = ["p/a@0"], split_index = 0, splits = 1} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/one_split.nd":6:5)
    %c = "netc.tanh"() {name = "c", parents = ["p/b@0"]} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/one_split.nd":8:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/expand-model-parallel/one_split.nd":2:9)
}) {source = "tests/golden/expand-model-parallel/one_split.nd"} : () -> () loc("tests/golden/expand-model-parallel/one_split.nd":1:1)
