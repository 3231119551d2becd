"builtin.module"() ({
  "netc.network"() ({
    %x_0 = "netc.input"() {name = "x:0", dtype = "f32", partition = {of = "x", replica = true}, shape = [2, 4, 4, 3], worker = 0} : () -> tensor<2x4x4x3xf32> loc("tests/golden/partition/paleo_splits.nd":5:9)
    %tower.conv$0 = "netc.conv2d"(%x_0) {name = "tower/conv@0", filter = [3, 3, 3, 4], padding = "SAME", split_index = 0, splits = 2, worker = 0} : (tensor<2x4x4x3xf32>) -> tensor<2x4x4x2xf32> loc("tests/golden/partition/paleo_splits.nd":7:5)
    %x_1 = "netc.input"() {name = "x:1", dtype = "f32", partition = {of = "x", replica = true}, shape = [2, 4, 4, 3], worker = 1} : () -> tensor<2x4x4x3xf32> loc("tests/golden/partition/paleo_splits.nd":5:9)
    %tower.conv$1 = "netc.conv2d"(%x_1) {name = "tower/conv@1", filter = [3, 3, 3, 4], padding = "SAME", split_index = 1, splits = 2, worker = 1} : (tensor<2x4x4x3xf32>) -> tensor<2x4x4x2xf32> loc("tests/golden/partition/paleo_splits.nd":7:5)
    %tower.both$0 = "netc.all_gather"(%tower.conv$0, %tower.conv$1) {name = "tower/both@0", dim = 3, ranks = [0, 1], worker = 0} : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<2x4x4x4xf32> loc("tests/golden/partition/paleo_splits.nd":8:5)
    %tower.both$1 = "netc.all_gather"(%tower.conv$0, %tower.conv$1) {name = "tower/both@1", dim = 3, ranks = [0, 1], worker = 1} : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<2x4x4x4xf32> loc("tests/golden/partition/paleo_splits.nd":8:5)
    %tower.both$1.send_1-_0_ = "netc.send"(%tower.both$1) {name = "tower/both@1.send(1->0)", peer = 0, worker = 1} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> loc("tests/golden/partition/paleo_splits.nd":10:3)
    %tower.both$1.recv_1-_0_ = "netc.recv"(%tower.both$1.send_1-_0_) {name = "tower/both@1.recv(1->0)", peer = 1, worker = 0} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> loc("tests/golden/partition/paleo_splits.nd":10:3)
    %out = "netc.concat"(%tower.both$0, %tower.both$1.recv_1-_0_) {name = "out", dim = 3, worker = 0} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x8xf32> loc("tests/golden/partition/paleo_splits.nd":10:3)
    "netc.output"(%out) : (tensor<2x4x4x8xf32>) -> () loc("tests/golden/partition/paleo_splits.nd":4:9)
  }) {sym_name = "paleo", workers = 2} : () -> () loc("tests/golden/partition/paleo_splits.nd":4:9)
}) {source = "tests/golden/partition/paleo_splits.nd"} : () -> () loc("tests/golden/partition/paleo_splits.nd":1:1)
