"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [16, 8, 8, 32]} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":5:9)
    %tower.conv$0 = "netc.conv2d"() {name = "tower/conv@0", filter = [3, 3, 32, 64], parents = ["data"], split_index = 0, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":7:5)
    %tower.relu$0 = "netc.relu"() {name = "tower/relu@0", parents = ["tower/conv@0"], split_index = 0, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":8:5)
    %tower.bn$0 = "netc.batch_norm"() {name = "tower/bn@0", parents = ["tower/relu@0"], split_index = 0, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":9:5)
    %tower.cat$0 = "netc.concat"() {name = "tower/cat@0", parents = ["tower/bn@0", "tower/bn@1"], split_index = 0, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":10:5)
    %tower.conv$1 = "netc.conv2d"() {name = "tower/conv@1", filter = [3, 3, 32, 64], parents = ["data"], split_index = 1, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":7:5)
    %tower.relu$1 = "netc.relu"() {name = "tower/relu@1", parents = ["tower/conv@1"], split_index = 1, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":8:5)
    %tower.bn$1 = "netc.batch_norm"() {name = "tower/bn@1", parents = ["tower/relu@1"], split_index = 1, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":9:5)
    %tower.cat$1 = "netc.concat"() {name = "tower/cat@1", parents = ["tower/bn@0", "tower/bn@1"], split_index = 1, splits = 2} : () -> tensor<*xf32> loc("tests/golden/expand-model-parallel/self_all.nd":10:5)
  }) {sym_name = "net"} : () -> () loc("tests/golden/expand-model-parallel/self_all.nd":4:9)
}) {source = "tests/golden/expand-model-parallel/self_all.nd"} : () -> () loc("tests/golden/expand-model-parallel/self_all.nd":1:1)
