from optima_pipelines.sensors.cabinets import plan_cabinet_partitions


def test_new_cabinets_are_added_and_removed_ones_kept():
    plan = plan_cabinet_partitions(["a", "b", "c"], ["a", "z"])
    assert plan.to_add == ["b", "c"]
    assert plan.orphaned == ["z"]


def test_nothing_to_do_when_in_step():
    plan = plan_cabinet_partitions(["a"], ["a"])
    assert plan.to_add == [] and plan.orphaned == []
