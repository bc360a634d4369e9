"""analyze"""
