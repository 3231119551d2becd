"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [8, 16]} : () -> tensor<*xf32> loc("tests/golden/select-phase/include_exclude.nd":4:9)
    %labels = "netc.input"() {name = "labels", dtype = "f32", shape = [8]} : () -> tensor<*xf32> loc("tests/golden/select-phase/include_exclude.nd":5:9)
    %fc = "netc.inner_product"() {name = "fc", num_outputs = 4, parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/include_exclude.nd":7:3)
    %drop = "netc.dropout"() {name = "drop", parents = ["fc"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/include_exclude.nd":8:3)
    %loss = "netc.softmax_loss"() {name = "loss", parents = ["drop", "labels"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/include_exclude.nd":10:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/select-phase/include_exclude.nd":3:9)
}) {source = "tests/golden/select-phase/include_exclude.nd"} : () -> () loc("tests/golden/select-phase/include_exclude.nd":1:1)
